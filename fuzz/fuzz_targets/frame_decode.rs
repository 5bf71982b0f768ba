//! Fuzz the protocol decoder: the daemon reads frames from any local user,
//! so reassembling and decoding arbitrary bytes must never panic.
//!
//! Input layout: the first byte `n` says how many of the following bytes
//! (`n % 8`) are chunk sizes; the rest is the byte stream. The stream is
//! pushed into a `FrameReader` in pieces of those sizes (cycled), and every
//! payload is decoded both as a client and as a daemon message.
//!
//! Properties checked:
//! - chunking does not matter: the payloads (and the final error, if any)
//!   are the same as when the whole stream is pushed at once;
//! - no payload is longer than the reader's cap;
//! - a `ClientMsg` that decodes re-encodes to a frame that decodes back to
//!   the same message, compared by its encoding: `ReportDemand` carries
//!   `f64`, and NaN != NaN. (Not asserted for `DaemonMsg`.)
#![no_main]

use hetsched_protocol::{
    FRAME_HEADER_BYTES, FrameError, FrameReader, MAX_FRAME_BYTES, PROTOCOL_VERSION, decode_client,
    decode_daemon, encode_frame,
};
use libfuzzer_sys::fuzz_target;

/// Pushes `stream` in pieces of `sizes` (cycled; a size of 0 means 1) and
/// drains the reader after every push.
fn reassemble(stream: &[u8], sizes: &[u8]) -> (Vec<Vec<u8>>, Option<FrameError>) {
    let mut reader = FrameReader::default();
    let mut payloads = Vec::new();
    let mut rest = stream;
    let mut i = 0;
    while !rest.is_empty() {
        let size = match sizes.get(i % sizes.len().max(1)) {
            Some(&s) => usize::from(s).max(1),
            None => rest.len(),
        };
        i += 1;
        let (chunk, tail) = rest.split_at(size.min(rest.len()));
        rest = tail;
        reader.push(chunk);
        loop {
            match reader.next_payload() {
                Ok(Some(p)) => {
                    assert!(p.len() <= MAX_FRAME_BYTES, "payload over the cap");
                    payloads.push(p);
                }
                Ok(None) => break,
                Err(e) => return (payloads, Some(e)),
            }
        }
    }
    (payloads, None)
}

fn check_payload(payload: &[u8]) {
    if let Ok(msg) = decode_client(payload) {
        let frame = encode_frame(&msg);
        assert!(frame.len() >= FRAME_HEADER_BYTES);
        let len = u32::from_le_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
        assert_eq!(
            len,
            frame.len() - FRAME_HEADER_BYTES,
            "header length is wrong"
        );
        assert_eq!(frame[4], PROTOCOL_VERSION);
        let mut reader = FrameReader::default();
        reader.push(&frame);
        let again = reader
            .next_payload()
            .expect("re-encoded frame is readable")
            .expect("re-encoded frame is complete");
        assert_eq!(reader.pending(), 0);
        let back = decode_client(&again).expect("re-encoded ClientMsg decodes");
        assert_eq!(
            encode_frame(&back),
            frame,
            "ClientMsg does not survive a round trip: {msg:?} came back as {back:?}"
        );
    }
    if let Ok(msg) = decode_daemon(payload) {
        // Re-encoding must not panic; equality is not asserted (f64 NaN).
        let _ = encode_frame(&msg);
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let k = usize::from(n % 8).min(rest.len());
    let (sizes, stream) = rest.split_at(k);

    // The stream itself as a bare payload: reaches the message decoder
    // without the fuzzer having to build a valid header first.
    check_payload(stream);

    let (payloads, err) = reassemble(stream, sizes);
    let (whole, whole_err) = reassemble(stream, &[]);
    assert_eq!(payloads, whole, "chunking changed the payloads");
    assert_eq!(err, whole_err, "chunking changed the framing error");

    for p in &payloads {
        check_payload(p);
    }
});
