//! Fuzz the kernel-call decoder: any local client writes the packet words
//! the daemon decodes before it touches the client's data region, so no
//! words may panic it or yield a range the region does not hold.
//!
//! Input layout: 8 bytes of region size, then 7 little-endian words.
//!
//! Properties checked:
//! - an accepted call's input, output and extra argument lie inside the
//!   region, and its input is not empty;
//! - its output is exactly as long as its kernel writes;
//! - input and output are the same range or do not overlap;
//! - it encodes back to the words it came from.
#![no_main]

use hetsched_protocol::kernel_call::decode;
use libfuzzer_sys::fuzz_target;

fn word(bytes: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w[..bytes.len()].copy_from_slice(bytes);
    u64::from_le_bytes(w)
}

fuzz_target!(|data: &[u8]| {
    let mut chunks = data.chunks(8);
    let region = chunks.next().map_or(0, word);
    let mut words = [0u64; 7];
    for (w, c) in words.iter_mut().zip(chunks) {
        *w = word(c);
    }
    let Ok(call) = decode(&words, region) else {
        return;
    };
    for r in [&call.input, &call.output, &call.aux] {
        assert!(r.start <= r.end && r.end <= region, "{r:?} outside {region}");
    }
    assert!(call.input.start < call.input.end, "empty input accepted");
    assert_eq!(
        call.output.end - call.output.start,
        call.kernel.out_len(call.in_len())
    );
    let disjoint = call.input.end <= call.output.start || call.output.end <= call.input.start;
    assert!(call.input == call.output || disjoint, "partial overlap");
    assert_eq!(call.to_words(), words);
});
