//! What the daemon and a kernel executor process
//! ([`super::sandbox`]) say to each other over their socket pair: frames
//! of `[len: u32 LE][postcard payload]`, a request from the daemon, then
//! one reply from the executor, in turn. A client's first call on a data
//! region carries the region (a memfd) by SCM_RIGHTS.
//!
//! The executor runs kernels clients wrote, so the daemon trusts nothing
//! it says: [`decode_reply`] bounds the length before allocating and
//! refuses a malformed or trailing payload, and a reply that makes no
//! sense for the request is an error that ends the executor.

use hetsched_core::ids::ClientId;
use hetsched_protocol::user_kernel::{KernelSignature, UserCall, UserKernelId};
use serde::{Deserialize, Serialize};
use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Instant;

/// Largest frame either side sends: a kernel source (at most 1 MiB), a
/// compiler's log (cut to [`MAX_LOG_BYTES`]), a signature.
pub const MAX_FRAME_BYTES: usize = 2 << 20;

/// Most bytes of a compiler's log the executor sends back.
pub const MAX_LOG_BYTES: usize = 64 << 10;

/// The device an executor opens: device `index` of the device API named
/// `api` ([`super::device_api::DeviceApi::name`]: `opencl`, `cuda`), in
/// that API's own numbering.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceSpec {
    pub api: String,
    pub index: usize,
}

/// What the daemon asks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Request {
    /// The first request: open `device`, sandboxed.
    Start(StartSpec),
    /// Build `entry` of `source` for `client`, adding at most
    /// `memory_bytes` to the executor's memory while at it.
    Register {
        client: ClientId,
        source: String,
        entry: String,
        memory_bytes: u64,
    },
    /// Run a checked call for `client` on the region sent with it, or
    /// without one, on the region sent with its last call.
    Run { client: ClientId, call: UserCall },
    /// `client` left: drop its buffers and the kernels only it used.
    Forget { client: ClientId },
}

/// What a new executor is to be.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StartSpec {
    pub device: DeviceSpec,
    /// Bytes a client may keep on the device between calls.
    pub max_kept_bytes: u64,
    /// The one directory it may write (the OpenCL driver's kernel cache).
    pub cache_dir: std::path::PathBuf,
}

/// What the executor answers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Reply {
    /// `Start` done: the device is open and the sandbox in place
    /// (`sandbox` says how far the kernel enforces it).
    Ready { device: String, sandbox: String },
    /// `Register` done.
    Registered {
        id: UserKernelId,
        signature: KernelSignature,
        log: String,
        cached: bool,
    },
    /// `Run` done.
    Ran,
    /// `Forget` done.
    Forgot,
    /// The request failed; the executor goes on.
    Failed(String),
}

/// Encodes `msg` as one frame.
pub fn encode<M: Serialize>(msg: &M) -> Vec<u8> {
    let mut out = postcard::to_extend(msg, vec![0u8; 4]).expect("our messages serialise");
    let len = (out.len() - 4) as u32;
    out[..4].copy_from_slice(&len.to_le_bytes());
    out
}

/// Decodes a payload, all of it, into one message.
fn decode<M: for<'de> Deserialize<'de>>(payload: &[u8]) -> Result<M, String> {
    let (msg, rest) = postcard::take_from_bytes(payload).map_err(|e| e.to_string())?;
    if rest.is_empty() {
        Ok(msg)
    } else {
        Err(format!("{} bytes after the message", rest.len()))
    }
}

/// Decodes the payload of an executor's frame (the daemon's side).
pub fn decode_reply(payload: &[u8]) -> Result<Reply, String> {
    decode(payload)
}

/// Decodes the payload of the daemon's frame (the executor's side).
pub fn decode_request(payload: &[u8]) -> Result<Request, String> {
    decode(payload)
}

/// Sends one frame with `fds` attached.
pub fn send(socket: impl AsFd, frame: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    hetsched_protocol::send_with_fds(socket, frame, fds)
}

/// Why a reply did not come.
#[derive(Debug)]
pub enum RecvError {
    /// Nothing whole came before the deadline.
    TimedOut,
    /// The peer closed its end (it ended).
    Closed,
    /// The length or payload is not a frame.
    Bad(String),
    Io(io::Error),
}

impl std::fmt::Display for RecvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecvError::TimedOut => f.write_str("no answer in time"),
            RecvError::Closed => f.write_str("it closed its socket"),
            RecvError::Bad(why) => write!(f, "it sent a malformed frame: {why}"),
            RecvError::Io(e) => write!(f, "reading its socket failed: {e}"),
        }
    }
}

/// Reads one frame's payload and the descriptors sent with it, waiting
/// until `deadline` at most (`None`: for ever).
pub fn recv(
    socket: &std::os::unix::net::UnixStream,
    deadline: Option<Instant>,
) -> Result<(Vec<u8>, Vec<OwnedFd>), RecvError> {
    let mut fds = Vec::new();
    let mut header = [0u8; 4];
    read_exact(socket, &mut header, deadline, &mut fds)?;
    let len = u32::from_le_bytes(header) as usize;
    if len > MAX_FRAME_BYTES {
        return Err(RecvError::Bad(format!(
            "a frame of {len} bytes (at most {MAX_FRAME_BYTES})"
        )));
    }
    let mut payload = vec![0u8; len];
    read_exact(socket, &mut payload, deadline, &mut fds)?;
    Ok((payload, fds))
}

fn read_exact(
    socket: &std::os::unix::net::UnixStream,
    buf: &mut [u8],
    deadline: Option<Instant>,
    fds: &mut Vec<OwnedFd>,
) -> Result<(), RecvError> {
    let mut got = 0;
    while got < buf.len() {
        if let Some(d) = deadline {
            wait_readable(socket, d)?;
        }
        match hetsched_protocol::recv_with_fds(socket, &mut buf[got..]) {
            Ok((0, _)) => return Err(RecvError::Closed),
            Ok((n, more)) => {
                got += n;
                fds.extend(more);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {
                return Err(RecvError::Closed);
            }
            Err(e) => return Err(RecvError::Io(e)),
        }
    }
    Ok(())
}

/// Waits until `socket` has something to read (or its peer closed), or
/// `deadline` passed.
fn wait_readable(socket: impl AsFd, deadline: Instant) -> Result<(), RecvError> {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(RecvError::TimedOut);
        }
        let timeout = Timespec {
            tv_sec: left.as_secs() as i64,
            tv_nsec: i64::from(left.subsec_nanos()),
        };
        let mut fds = [PollFd::new(&socket, PollFlags::IN)];
        match poll(&mut fds, Some(&timeout)) {
            Ok(0) => {}
            Ok(_) => return Ok(()),
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(RecvError::Io(e.into())),
        }
    }
}

/// A blocking stream for the executor's side, which waits for ever for
/// the daemon's next request (it ends when the daemon closes its end).
pub fn write_all(mut socket: &std::os::unix::net::UnixStream, frame: &[u8]) -> io::Result<()> {
    socket.write_all(frame)
}

/// Reads exactly `buf` (a test helper for streams without descriptors).
#[cfg(test)]
fn read_plain(mut socket: &std::os::unix::net::UnixStream, buf: &mut [u8]) -> io::Result<()> {
    std::io::Read::read_exact(&mut socket, buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hetsched_protocol::user_kernel::UserArg;
    use std::os::unix::net::UnixStream;
    use std::time::Duration;

    #[test]
    fn a_request_and_its_region_arrive_together() {
        let (a, b) = UnixStream::pair().unwrap();
        let call = UserCall {
            kernel: UserKernelId(3),
            global: 64,
            local: Some(8),
            args: vec![
                UserArg::Buffer {
                    range: 0..256,
                    flags: 3,
                },
                UserArg::Scalar(7),
            ],
        };
        let req = Request::Run {
            client: ClientId(9),
            call,
        };
        let (region, _client) = hetsched_views::data_region::pair(4096).unwrap();
        send(&a, &encode(&req), &[region.fd()]).unwrap();
        let (payload, fds) = recv(&b, Some(Instant::now() + Duration::from_secs(5))).unwrap();
        assert_eq!(decode_request(&payload).unwrap(), req);
        assert_eq!(fds.len(), 1);
    }

    #[test]
    fn a_silent_or_gone_peer_is_told_apart() {
        let (a, b) = UnixStream::pair().unwrap();
        let err = recv(&b, Some(Instant::now() + Duration::from_millis(20))).unwrap_err();
        assert!(matches!(err, RecvError::TimedOut), "{err}");
        write_all(&a, &u32::MAX.to_le_bytes()).unwrap();
        let err = recv(&b, None).unwrap_err();
        assert!(matches!(err, RecvError::Bad(_)), "{err}");
        drop(a);
        let err = recv(&b, None).unwrap_err();
        assert!(matches!(err, RecvError::Closed), "{err}");
    }

    #[test]
    fn malformed_replies_are_errors() {
        let frame = encode(&Reply::Failed("no".into()));
        assert_eq!(
            decode_reply(&frame[4..]).unwrap(),
            Reply::Failed("no".into())
        );
        let mut long = frame[4..].to_vec();
        long.push(0);
        assert!(decode_reply(&long).unwrap_err().contains("after"));
        assert!(decode_reply(&[200, 1, 2]).is_err());
        // The fuzz corpus's seeds (fuzz/corpus/executor_reply).
        assert_eq!(decode_reply(&[2]).unwrap(), Reply::Ran);
        assert_eq!(decode_reply(&[3]).unwrap(), Reply::Forgot);
        let (a, b) = UnixStream::pair().unwrap();
        write_all(&a, &frame).unwrap();
        let mut buf = vec![0u8; frame.len()];
        read_plain(&b, &mut buf).unwrap();
        assert_eq!(buf, frame);
    }
}
