//! One connection of the `/metrics` listener: one request read within a
//! size and time limit, one answer written within a time limit, then the
//! connection is closed. Nothing here blocks for longer than the
//! connection's deadline.

use super::exposition::CONTENT_TYPE;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a connection may cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest request head (request line and headers), bytes; a longer
    /// one is answered 431.
    pub max_header_bytes: usize,
    /// How long reading the request may take, and then how long writing
    /// the answer may take: a client slower than that is dropped.
    pub timeout: Duration,
    /// Connections accepted and not yet finished; one more is answered
    /// 503 at once.
    pub max_connections: usize,
    /// Threads that serve connections (besides the one that accepts).
    pub workers: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_header_bytes: 8 << 10,
            timeout: Duration::from_secs(5),
            max_connections: 64,
            workers: 4,
        }
    }
}

/// How much of what a client sends after its request is read (and
/// dropped) before closing, so that closing sends FIN rather than a reset
/// that could discard the answer before the client reads it.
const DRAIN_BYTES: usize = 64 << 10;
/// The longest that drain may take.
const DRAIN_FOR: Duration = Duration::from_millis(500);

/// Serves one connection: reads a request, answers it, closes. Errors
/// (the client went away or was too slow) end the connection quietly.
pub(crate) fn serve(
    mut stream: TcpStream,
    limits: &Limits,
    exposition: &(dyn Fn() -> Option<Arc<str>> + Sync),
) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_nodelay(true);
    let read_by = Instant::now() + limits.timeout;
    let answer = match read_head(&mut stream, limits.max_header_bytes, read_by) {
        Ok(Some(head)) => route(&head, exposition),
        Ok(None) => return, // closed before a whole request came
        Err(HeadError::TooLarge) => Answer::text(
            431,
            "Request Header Fields Too Large",
            "request head too large\n",
        ),
        Err(HeadError::TimedOut) => Answer::text(408, "Request Timeout", "request too slow\n"),
        Err(HeadError::Io) => return,
    };
    let write_by = Instant::now() + limits.timeout;
    if answer.write(&mut stream, write_by).is_ok() {
        close_after_answer(&mut stream);
    }
}

/// Answers a connection over the cap with 503 without waiting for it:
/// what it sent already is dropped, the answer is one non-blocking write.
pub(crate) fn refuse_busy(mut stream: TcpStream) {
    let _ = stream.set_nonblocking(true);
    let mut scratch = [0u8; 4096];
    let _ = stream.read(&mut scratch);
    let answer = Answer::text(
        503,
        "Service Unavailable",
        "too many /metrics connections; try again\n",
    );
    let mut bytes = answer.head(answer.body.len());
    bytes.extend_from_slice(answer.body.as_bytes());
    let _ = stream.write(&bytes);
    let _ = stream.shutdown(Shutdown::Write);
}

enum HeadError {
    TooLarge,
    TimedOut,
    Io,
}

/// The request head, up to and without the blank line; `None` if the
/// client closed first.
fn read_head(
    stream: &mut TcpStream,
    max: usize,
    deadline: Instant,
) -> Result<Option<String>, HeadError> {
    let mut head: Vec<u8> = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    loop {
        if let Some(end) = head_end(&head) {
            if end > max {
                return Err(HeadError::TooLarge);
            }
            head.truncate(end);
            return Ok(Some(String::from_utf8_lossy(&head).into_owned()));
        }
        if head.len() > max {
            return Err(HeadError::TooLarge);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(HeadError::TimedOut);
        }
        stream
            .set_read_timeout(Some(left))
            .map_err(|_| HeadError::Io)?;
        // Never more than the cap plus one chunk is held.
        let room = (max + 1 - head.len().min(max)).min(chunk.len());
        match stream.read(&mut chunk[..room]) {
            Ok(0) => return Ok(None),
            Ok(n) => head.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Err(HeadError::TimedOut);
            }
            Err(_) => return Err(HeadError::Io),
        }
    }
}

/// Where the head ends (the index of its blank line), if it has.
fn head_end(bytes: &[u8]) -> Option<usize> {
    let crlf = bytes.windows(4).position(|w| w == b"\r\n\r\n");
    let lf = bytes.windows(2).position(|w| w == b"\n\n");
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// An answer: status, content type and body.
struct Answer {
    status: u16,
    reason: &'static str,
    content_type: &'static str,
    body: Arc<str>,
    /// HEAD: the headers only.
    head_only: bool,
}

impl Answer {
    fn text(status: u16, reason: &'static str, body: &str) -> Answer {
        Answer {
            status,
            reason,
            content_type: "text/plain; charset=utf-8",
            body: body.into(),
            head_only: false,
        }
    }

    fn head(&self, length: usize) -> Vec<u8> {
        format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {length}\r\n\
             Connection: close\r\nCache-Control: no-store\r\n\r\n",
            self.status, self.reason, self.content_type
        )
        .into_bytes()
    }

    /// Writes the answer, all of it by `deadline` or not at all.
    fn write(&self, stream: &mut TcpStream, deadline: Instant) -> std::io::Result<()> {
        let head = self.head(self.body.len());
        let body: &[u8] = if self.head_only {
            &[]
        } else {
            self.body.as_bytes()
        };
        for part in [&head[..], body] {
            for piece in part.chunks(64 << 10) {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(ErrorKind::TimedOut.into());
                }
                stream.set_write_timeout(Some(left))?;
                stream.write_all(piece)?;
            }
        }
        Ok(())
    }
}

/// The answer to the request whose head is `head`.
fn route(head: &str, exposition: &(dyn Fn() -> Option<Arc<str>> + Sync)) -> Answer {
    let line = head.lines().next().unwrap_or("");
    let mut words = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return Answer::text(400, "Bad Request", "bad request line\n");
    };
    if !version.starts_with("HTTP/1.") {
        return Answer::text(
            505,
            "HTTP Version Not Supported",
            "only HTTP/1.x is served\n",
        );
    }
    let head_only = method == "HEAD";
    if method != "GET" && !head_only {
        return Answer::text(405, "Method Not Allowed", "only GET\n");
    }
    let path = target.split('?').next().unwrap_or("");
    let mut answer = match path {
        "/metrics" => match exposition() {
            Some(text) => Answer {
                status: 200,
                reason: "OK",
                content_type: CONTENT_TYPE,
                body: text,
                head_only: false,
            },
            None => Answer::text(503, "Service Unavailable", "no snapshot yet\n"),
        },
        "/" => Answer::text(200, "OK", "hetsched daemon: metrics at /metrics\n"),
        _ => Answer::text(404, "Not Found", "not found: try /metrics\n"),
    };
    answer.head_only = head_only;
    answer
}

/// Ends the connection once the answer is written: no more writes, then
/// what the client still sends (a pipelined request) is read and dropped
/// for a moment, so that the close does not reset the answer away.
fn close_after_answer(stream: &mut TcpStream) {
    let _ = stream.shutdown(Shutdown::Write);
    let until = Instant::now() + DRAIN_FOR;
    let mut scratch = [0u8; 4096];
    let mut drained = 0;
    while drained < DRAIN_BYTES {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return;
        }
        match stream.read(&mut scratch) {
            Ok(0) => return,
            Ok(n) => drained += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(head: &str) -> (u16, bool) {
        let a = route(head, &|| Some("m 1\n# EOF\n".into()));
        (a.status, a.head_only)
    }

    #[test]
    fn requests_are_routed_by_method_and_path() {
        assert_eq!(answer("GET /metrics HTTP/1.1\r\nHost: x"), (200, false));
        assert_eq!(answer("GET /metrics?x=1 HTTP/1.0"), (200, false));
        assert_eq!(answer("HEAD /metrics HTTP/1.1"), (200, true));
        assert_eq!(answer("GET / HTTP/1.1"), (200, false));
        assert_eq!(answer("GET /other HTTP/1.1"), (404, false));
        assert_eq!(answer("POST /metrics HTTP/1.1"), (405, false));
        assert_eq!(answer("GET /metrics HTTP/2"), (505, false));
        assert_eq!(answer("GET /metrics"), (400, false));
        assert_eq!(answer("nonsense"), (400, false));
        assert_eq!(answer(""), (400, false));
    }

    #[test]
    fn no_snapshot_yet_is_503() {
        let a = route("GET /metrics HTTP/1.1", &|| None);
        assert_eq!(a.status, 503);
    }

    #[test]
    fn the_head_ends_at_the_first_blank_line() {
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nA: b\r\n\r\nGET"), Some(20));
        assert_eq!(head_end(b"GET / HTTP/1.0\n\n"), Some(14));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nA: b\r\n"), None);
    }
}
