//! Fuzz the checks on a registered kernel's call: the packet words, and
//! the argument block the daemon copies out of the client's region and
//! checks against the kernel's signature before anything runs.
//!
//! Input layout: 1 byte choosing a signature's parameter kinds (two bits
//! each, for up to four parameters), 8 bytes of region size, 7 packet
//! words, then the argument block.
//!
//! Properties checked for an accepted call:
//! - every buffer lies inside the region, is not empty and has only
//!   defined flags; together they fit in the region;
//! - no read-only buffer is copied out, no 4-byte scalar has high bytes;
//! - one argument per parameter, of the parameter's kind.
#![no_main]

use hetsched_protocol::kernel_call::{Packet, decode_packet};
use hetsched_protocol::user_kernel::{
    KernelSignature, ParamKind, ParamSpec, USER_KERNEL_BASE, UserArg, flags,
};
use libfuzzer_sys::fuzz_target;

fn word(bytes: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w[..bytes.len()].copy_from_slice(bytes);
    u64::from_le_bytes(w)
}

fn signature(choice: u8) -> KernelSignature {
    let params = (0..4)
        .map(|i| {
            let kind = match (choice >> (2 * i)) & 3 {
                0 => ParamKind::Buffer { read_only: true },
                1 => ParamKind::Buffer { read_only: false },
                2 => ParamKind::U32,
                _ => ParamKind::Local,
            };
            ParamSpec {
                name: format!("p{i}"),
                ty: String::new(),
                kind,
            }
        })
        .collect();
    KernelSignature {
        entry: "k".into(),
        params,
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&choice, rest)) = data.split_first() else {
        return;
    };
    let mut chunks = rest.chunks(8);
    let region = chunks.next().map_or(0, word);
    let mut words = [0u64; 7];
    for (w, c) in words.iter_mut().zip(&mut chunks) {
        *w = word(c);
    }
    // Point the packet at a registered kernel half of the time.
    if choice & 1 == 0 {
        words[1] = USER_KERNEL_BASE + (words[1] & 0xff);
    }
    let block: Vec<u8> = rest.iter().skip(64).copied().collect();
    let Ok(Packet::User(packet)) = decode_packet(&words, region) else {
        return;
    };
    assert!(
        packet.args.end <= region,
        "argument block outside the region"
    );
    assert!(packet.global > 0);
    let sig = signature(choice);
    let Ok(call) = packet.bind(&sig, &block, region) else {
        return;
    };
    let user = call.user.expect("a bound call has its arguments");
    assert_eq!(user.args.len(), sig.params.len());
    let mut total = 0u64;
    for (arg, param) in user.args.iter().zip(&sig.params) {
        match (arg, param.kind) {
            (UserArg::Buffer { range, flags: f }, ParamKind::Buffer { read_only }) => {
                assert!(range.start < range.end && range.end <= region);
                assert_eq!(f & !flags::ALL, 0);
                assert!(!(read_only && f & flags::COPY_OUT != 0));
                total += range.end - range.start;
            }
            (UserArg::Scalar(v), ParamKind::U32) => assert_eq!(v >> 32, 0),
            (UserArg::Local(n), ParamKind::Local) => assert!(*n > 0),
            (a, k) => panic!("{a:?} for a {k:?} parameter"),
        }
    }
    assert!(total <= region);
});
