//! Microbenchmark kernels: calibration runs them on every core kind, and
//! the balancer's experiment runs them as worker processes.
//!
//! They span the characterisation space of SmartBalance Eq. 8: integer and
//! floating-point chains (high IPC), unpredictable branches, pointer
//! chasing in working sets from L1 to DRAM size, and a streaming sum.

/// A microbenchmark: `run` does one unit of work and returns a value the
/// optimiser cannot drop.
#[derive(Clone, Copy, Debug)]
pub struct Kernel {
    pub name: &'static str,
    pub(crate) run: fn(&mut State) -> u64,
    /// Working set, bytes (pointer chase and stream).
    pub(crate) bytes: usize,
}

/// Per-thread data the kernels work on.
pub(crate) struct State {
    next: Vec<u32>,
    data: Vec<u64>,
    pos: u32,
    rng: u64,
    acc: f64,
}

impl State {
    pub(crate) fn new(bytes: usize, seed: u64) -> State {
        let n = (bytes / 8).max(64);
        // A single random cycle through all slots (Sattolo's algorithm),
        // so pointer chasing visits the whole working set.
        let mut next: Vec<u32> = (0..n as u32).collect();
        let mut rng = seed | 1;
        for i in (1..n).rev() {
            rng = xorshift(rng);
            let j = (rng % i as u64) as usize;
            next.swap(i, j);
        }
        State {
            next,
            data: (0..n as u64).collect(),
            pos: 0,
            rng,
            acc: 1.0,
        }
    }
}

fn xorshift(mut x: u64) -> u64 {
    x ^= x << 13;
    x ^= x >> 7;
    x ^ (x << 17)
}

fn int_chain(s: &mut State) -> u64 {
    let mut x = s.rng;
    for _ in 0..4096 {
        x = x.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(x >> 7);
    }
    s.rng = x;
    x
}

fn float_chain(s: &mut State) -> u64 {
    let mut a = s.acc;
    for i in 0..4096 {
        a = a * 1.000_000_1 + (i as f64) * 1e-9;
    }
    s.acc = a;
    a.to_bits()
}

fn branchy(s: &mut State) -> u64 {
    let mut x = s.rng;
    let mut n = 0u64;
    for _ in 0..4096 {
        x = xorshift(x);
        if x & 1 == 0 {
            n = n.wrapping_add(x & 0xff);
        } else if x & 2 == 0 {
            n ^= x;
        } else {
            n = n.wrapping_sub(3);
        }
    }
    s.rng = x;
    n
}

/// AES-128 over 4 KiB (256 blocks): AES-NI where the CPU has it (the
/// `aes` crate picks at run time), the crate's constant-time software
/// rounds otherwise.
fn aes_blocks(s: &mut State) -> u64 {
    use aes::cipher::{BlockEncrypt, KeyInit, generic_array::GenericArray};
    let key = GenericArray::from(
        s.rng
            .to_le_bytes()
            .repeat(2)
            .try_into()
            .unwrap_or([0u8; 16]),
    );
    let cipher = aes::Aes128::new(&key);
    let mut acc = 0u64;
    for chunk in s.data.chunks_exact(2).take(256) {
        let mut block = [0u8; 16];
        block[..8].copy_from_slice(&chunk[0].to_le_bytes());
        block[8..].copy_from_slice(&chunk[1].to_le_bytes());
        let mut b = GenericArray::from(block);
        cipher.encrypt_block(&mut b);
        acc ^= u64::from_le_bytes(b[..8].try_into().unwrap_or([0; 8]));
    }
    s.rng = xorshift(s.rng ^ acc);
    acc
}

fn chase(s: &mut State) -> u64 {
    let mut p = s.pos;
    for _ in 0..1024 {
        p = s.next[p as usize];
    }
    s.pos = p;
    u64::from(p)
}

fn stream(s: &mut State) -> u64 {
    let len = s.data.len();
    let start = (s.pos as usize) % len;
    let end = (start + 4096).min(len);
    let sum = s.data[start..end]
        .iter()
        .fold(0u64, |a, &b| a.wrapping_add(b));
    s.pos = (end % len) as u32;
    sum
}

pub const KERNELS: [Kernel; 9] = [
    Kernel {
        name: "aes-128",
        run: aes_blocks,
        bytes: 4096,
    },
    Kernel {
        name: "int-chain",
        run: int_chain,
        bytes: 0,
    },
    Kernel {
        name: "float-chain",
        run: float_chain,
        bytes: 0,
    },
    Kernel {
        name: "branchy",
        run: branchy,
        bytes: 0,
    },
    Kernel {
        name: "chase-32k",
        run: chase,
        bytes: 32 << 10,
    },
    Kernel {
        name: "chase-1m",
        run: chase,
        bytes: 1 << 20,
    },
    Kernel {
        name: "chase-64m",
        run: chase,
        bytes: 64 << 20,
    },
    Kernel {
        name: "stream-1m",
        run: stream,
        bytes: 1 << 20,
    },
    Kernel {
        name: "stream-64m",
        run: stream,
        bytes: 64 << 20,
    },
];

impl Kernel {
    pub fn by_name(name: &str) -> Option<Kernel> {
        KERNELS.into_iter().find(|k| k.name == name)
    }
}

/// A kernel with its working set, ready to run unit after unit.
pub struct Runner {
    kernel: Kernel,
    state: State,
}

impl Runner {
    pub fn new(kernel: Kernel, seed: u64) -> Runner {
        Runner {
            kernel,
            state: State::new(kernel.bytes, seed),
        }
    }

    /// One unit of work.
    #[inline]
    pub fn step(&mut self) -> u64 {
        (self.kernel.run)(&mut self.state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_do_work_and_the_chase_visits_every_slot() {
        let s = State::new(4096, 7);
        let n = s.next.len();
        let mut seen = vec![false; n];
        let mut p = 0u32;
        for _ in 0..n {
            seen[p as usize] = true;
            p = s.next[p as usize];
        }
        assert!(seen.iter().all(|&v| v), "one cycle through all slots");
        for k in KERNELS {
            let mut st = State::new(k.bytes.min(1 << 16), 3);
            let a = (k.run)(&mut st);
            let b = (k.run)(&mut st);
            assert!(a != b || k.name.starts_with("stream"), "{}", k.name);
        }
    }
}
