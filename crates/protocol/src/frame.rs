//! Frames: `[len: u32 LE][version: u8][payload: len bytes]`.
//!
//! The length covers the payload only and is checked against a cap before
//! anything is allocated, so a hostile length cannot make a reader reserve
//! gigabytes. The version byte lets a daemon refuse a client speaking
//! another protocol revision with a clear error instead of misreading it.

use crate::message::{ClientMsg, DaemonMsg};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Revision of the message set. Bumped on any incompatible change.
pub const PROTOCOL_VERSION: u8 = 8;

/// Bytes before the payload: length (4) and version (1).
pub const FRAME_HEADER_BYTES: usize = 5;

/// Largest payload either side accepts. Status comes in pages well below
/// it ([`STATUS_PAGE_BYTES`]); anything larger is a broken or hostile peer.
pub const MAX_FRAME_BYTES: usize = 256 * 1024;

/// Most bytes the daemon puts in one status page's payload: it stops
/// adding clients before a page would pass it (the first client of a
/// page goes on whatever its size, so a walk of pages always moves on).
/// A quarter of the frame limit: far inside what a reader accepts, and
/// inside a Unix socket's default send buffer (208 KiB) even with other
/// replies queued, so the daemon's non-blocking send of a page does not
/// fall short and cut the asker off.
pub const STATUS_PAGE_BYTES: usize = MAX_FRAME_BYTES / 4;

/// Why bytes could not be turned into a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("frame of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge { len: usize, max: usize },
    #[error("frame speaks protocol version {got}, this side speaks {PROTOCOL_VERSION}")]
    Version { got: u8 },
    #[error("malformed frame payload: {0}")]
    Malformed(String),
    #[error("frame payload has {0} trailing bytes after the message")]
    Trailing(usize),
}

/// Encodes one message as a complete frame.
pub fn encode_frame<M: Serialize>(msg: &M) -> Vec<u8> {
    let mut out = vec![0u8; FRAME_HEADER_BYTES];
    // Serialising our own message types into a Vec cannot fail: postcard
    // only fails on unsupported serde features, which these types avoid.
    let mut out = postcard::to_extend(msg, std::mem::take(&mut out))
        .expect("protocol messages always serialise");
    let len = (out.len() - FRAME_HEADER_BYTES) as u32;
    out[..4].copy_from_slice(&len.to_le_bytes());
    out[4] = PROTOCOL_VERSION;
    out
}

/// Bytes of `msg`'s payload (its frame is [`FRAME_HEADER_BYTES`] more),
/// counted without encoding it.
pub fn encoded_len<M: Serialize + ?Sized>(msg: &M) -> usize {
    postcard::serialize_with_flavor::<M, postcard::ser_flavors::Size, usize>(
        msg,
        postcard::ser_flavors::Size::default(),
    )
    .expect("protocol messages always serialise")
}

fn decode<M: DeserializeOwned>(payload: &[u8]) -> Result<M, FrameError> {
    let (msg, rest) =
        postcard::take_from_bytes(payload).map_err(|e| FrameError::Malformed(e.to_string()))?;
    if rest.is_empty() {
        Ok(msg)
    } else {
        Err(FrameError::Trailing(rest.len()))
    }
}

/// Decodes the payload of a frame sent by a client.
pub fn decode_client(payload: &[u8]) -> Result<ClientMsg, FrameError> {
    decode(payload)
}

/// Decodes the payload of a frame sent by the daemon.
pub fn decode_daemon(payload: &[u8]) -> Result<DaemonMsg, FrameError> {
    decode(payload)
}

/// Reassembles frames from a byte stream that arrives in arbitrary pieces.
#[derive(Debug)]
pub struct FrameReader {
    buf: Vec<u8>,
    /// Start of unconsumed bytes in `buf` (consumed bytes are dropped lazily).
    start: usize,
    max: usize,
}

impl Default for FrameReader {
    fn default() -> Self {
        Self::new(MAX_FRAME_BYTES)
    }
}

impl FrameReader {
    pub fn new(max_frame_bytes: usize) -> Self {
        FrameReader {
            // Grown on the first bytes: an idle connection holds none.
            buf: Vec::new(),
            start: 0,
            max: max_frame_bytes,
        }
    }

    /// Appends bytes read from the stream.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.start > 0 && self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes received but not yet returned as frames.
    pub fn pending(&self) -> usize {
        self.buf.len() - self.start
    }

    /// The next complete payload, if one has arrived. An error means the
    /// stream is unusable from here on (its framing is lost).
    pub fn next_payload(&mut self) -> Result<Option<Vec<u8>>, FrameError> {
        let avail = &self.buf[self.start..];
        if avail.len() < FRAME_HEADER_BYTES {
            return Ok(None);
        }
        let len = u32::from_le_bytes([avail[0], avail[1], avail[2], avail[3]]) as usize;
        if len > self.max {
            return Err(FrameError::TooLarge { len, max: self.max });
        }
        if avail[4] != PROTOCOL_VERSION {
            return Err(FrameError::Version { got: avail[4] });
        }
        if avail.len() < FRAME_HEADER_BYTES + len {
            return Ok(None);
        }
        let payload = avail[FRAME_HEADER_BYTES..FRAME_HEADER_BYTES + len].to_vec();
        self.start += FRAME_HEADER_BYTES + len;
        if self.start > 64 * 1024 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        Ok(Some(payload))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{ClientMsg, SettingsRequest, WireClass};
    use hetsched_core::ids::{TaskId, UnitId};

    fn sample() -> Vec<ClientMsg> {
        vec![
            ClientMsg::RequestDispatch {
                unit: UnitId(3),
                task: TaskId(77),
                expected_ns: 1_000_000,
            },
            ClientMsg::SetSettings {
                target_pid: Some(42),
                unit: None,
                settings: SettingsRequest {
                    class: Some(WireClass::Custom(50)),
                    priority: None,
                },
            },
            ClientMsg::Goodbye,
        ]
    }

    #[test]
    fn frames_survive_byte_at_a_time_delivery() {
        let msgs = sample();
        let bytes: Vec<u8> = msgs.iter().flat_map(encode_frame).collect();
        let mut reader = FrameReader::default();
        let mut got = Vec::new();
        for b in bytes {
            reader.push(&[b]);
            while let Some(p) = reader.next_payload().unwrap() {
                got.push(decode_client(&p).unwrap());
            }
        }
        assert_eq!(got, msgs);
        assert_eq!(reader.pending(), 0);
    }

    #[test]
    fn oversized_length_is_refused_before_reading_the_payload() {
        let mut reader = FrameReader::new(1024);
        let mut header = (1u32 << 30).to_le_bytes().to_vec();
        header.push(PROTOCOL_VERSION);
        reader.push(&header);
        assert_eq!(
            reader.next_payload(),
            Err(FrameError::TooLarge {
                len: 1 << 30,
                max: 1024
            })
        );
    }

    #[test]
    fn other_protocol_version_is_named_in_the_error() {
        let mut frame = encode_frame(&ClientMsg::Goodbye);
        frame[4] = 9;
        let mut reader = FrameReader::default();
        reader.push(&frame);
        let err = reader.next_payload().unwrap_err();
        assert_eq!(err, FrameError::Version { got: 9 });
        assert!(err.to_string().contains("version 9"));
    }

    #[test]
    fn encoded_len_is_the_payload_length() {
        for msg in sample() {
            assert_eq!(
                encoded_len(&msg) + FRAME_HEADER_BYTES,
                encode_frame(&msg).len()
            );
        }
    }

    #[test]
    fn garbage_payload_is_malformed_not_a_panic() {
        assert!(matches!(
            decode_client(&[0xff, 0xff, 0xff]),
            Err(FrameError::Malformed(_))
        ));
        let mut ok = encode_frame(&ClientMsg::Goodbye)[FRAME_HEADER_BYTES..].to_vec();
        ok.push(0);
        assert_eq!(decode_client(&ok), Err(FrameError::Trailing(1)));
    }
}
