// A bare round trip between two threads over a Unix socket pair (32 bytes
// each way, blocking reads, the client asleep GAP_US between round trips):
// the anchor of docs/PERFORMANCE.md, "Dispatch gate". Not part of the
// workspace; scripts/bench.sh builds it with `rustc -O`.
//
//     rustc -O scripts/pingpong.rs -o pingpong && ./pingpong GAP_US SECONDS
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let gap: u64 = a.get(1).map_or(5000, |a| a.parse().unwrap());
    let secs: f64 = a.get(2).map_or(4.0, |a| a.parse().unwrap());
    let (mut c, mut s) = UnixStream::pair().unwrap();
    std::thread::spawn(move || {
        let mut b = [0u8; 32];
        while s.read_exact(&mut b).is_ok() && s.write_all(&b).is_ok() {}
    });
    let (mut v, start, mut b) = (Vec::new(), Instant::now(), [0u8; 32]);
    while start.elapsed().as_secs_f64() < secs {
        let t0 = Instant::now();
        c.write_all(&b).unwrap();
        c.read_exact(&mut b).unwrap();
        v.push(t0.elapsed().as_nanos() as u64);
        std::thread::sleep(Duration::from_micros(gap));
    }
    v.sort_unstable();
    let p = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize] as f64 / 1e3;
    println!("p50 {:.1} us, p90 {:.1} us, p99 {:.1} us", p(0.5), p(0.9), p(0.99));
}
