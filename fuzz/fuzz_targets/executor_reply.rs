//! Fuzz the daemon's decoder of what a kernel executor answers: an
//! executor runs kernels any permitted user wrote, so a kernel that
//! scribbles over its memory may make it send anything. No bytes may
//! panic the daemon, and an accepted reply encodes to bytes that decode
//! to it again.
//!
//! Input: the payload of one frame (the 4-byte length is the reader's,
//! bounded before anything is allocated).
#![no_main]

use hetsched_daemon::kernel_exec::wire::{decode_reply, encode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(reply) = decode_reply(data) else {
        return;
    };
    let frame = encode(&reply);
    assert_eq!(decode_reply(&frame[4..]).as_ref(), Ok(&reply));
});
