//! `GET /metrics` over HTTP/1.x, on std, so that no client of the
//! endpoint can hurt the daemon or the other scrapers:
//!
//! - the accepting thread (the caller of [`MetricsHttp::serve`]) and a
//!   fixed pool of [`Limits::workers`] threads, started in a scope and
//!   joined before `serve` returns: the thread count does not grow with
//!   connections;
//! - at most [`Limits::max_connections`] connections accepted and not
//!   finished; one more is answered 503 at once and closed;
//! - one request per connection, its head at most
//!   [`Limits::max_header_bytes`] (431 beyond); reading it, then writing
//!   the answer, each within [`Limits::timeout`]; a client that does not
//!   read its answer is dropped then, and ties up one worker until it is;
//! - an accept error (out of descriptors, of memory) is logged and
//!   retried after a pause: the listener keeps serving once the cause
//!   is gone.
//!
//! The text served is the monitor's latest published snapshot
//! (`hetsched_monitor::metrics`): a scrape never takes the state lock.
//!
//! tiny_http, used before, gave none of these: it started a thread per
//! connection past its pool with no cap, read request heads of any size,
//! answered the pipelined requests of one connection in order (one that
//! read nothing stalled every scraper), and its accept thread ended
//! silently on the first accept error.

use super::exchange;
pub use super::exchange::Limits;
pub use hetsched_monitor::host::MetricsBindError;
use hetsched_monitor::host::MetricsHttp;
use rustix::event::{EventfdFlags, PollFd, PollFlags, Timespec, eventfd, poll};
use std::io::ErrorKind;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long the listener pauses after an accept error before it tries
/// again (the cause, such as running out of descriptors, may last).
const ACCEPT_RETRY: Duration = Duration::from_millis(100);
/// Accept errors are logged at most this often (with a count of the ones
/// not logged).
const ERROR_LOG_EVERY: Duration = Duration::from_secs(10);

/// A bound metrics listener, not yet serving.
pub struct MetricsListener {
    listener: TcpListener,
    /// Written by the unblocker: ends `serve`.
    wake: Arc<OwnedFd>,
    limits: Limits,
}

impl std::fmt::Debug for MetricsListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsListener")
            .field("addr", &self.listener.local_addr().ok())
            .field("limits", &self.limits)
            .finish()
    }
}

impl MetricsListener {
    /// Binds `addr` with the default [`Limits`].
    pub fn bind(addr: SocketAddr) -> Result<MetricsListener, MetricsBindError> {
        Self::bind_with(addr, Limits::default())
    }

    pub fn bind_with(
        addr: SocketAddr,
        limits: Limits,
    ) -> Result<MetricsListener, MetricsBindError> {
        let failed = |why: String| MetricsBindError { addr, why };
        if limits.workers == 0 || limits.max_connections == 0 {
            return Err(failed("at least one worker and one connection".into()));
        }
        let listener = TcpListener::bind(addr).map_err(|e| failed(e.to_string()))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| failed(e.to_string()))?;
        let wake = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)
            .map_err(|e| failed(format!("eventfd: {e}")))?;
        Ok(MetricsListener {
            listener,
            wake: Arc::new(wake),
            limits,
        })
    }
}

impl MetricsHttp for MetricsListener {
    fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    fn unblocker(&self) -> Box<dyn Fn() + Send + Sync> {
        let wake = Arc::clone(&self.wake);
        Box::new(move || {
            let _ = rustix::io::write(&*wake, &1u64.to_ne_bytes());
        })
    }

    fn serve(self: Box<Self>, exposition: &(dyn Fn() -> Option<Arc<str>> + Sync)) {
        let limits = self.limits;
        let (queue, waiting) = sync_channel::<TcpStream>(limits.max_connections);
        let pool = Pool {
            waiting: Mutex::new(waiting),
            open: AtomicUsize::new(0),
            serving: (0..limits.workers).map(|_| Mutex::new(None)).collect(),
            stopping: AtomicBool::new(false),
        };
        std::thread::scope(|scope| {
            let mut started = 0;
            for i in 0..limits.workers {
                let (pool, limits) = (&pool, &limits);
                let spawned = std::thread::Builder::new()
                    .name("hetsched-metrics-http".into())
                    .spawn_scoped(scope, move || pool.work(i, limits, exposition));
                match spawned {
                    Ok(_) => started += 1,
                    Err(e) => tracing::warn!("metrics: cannot start a worker thread: {e}"),
                }
            }
            if started == 0 {
                tracing::error!("metrics: no worker thread started; /metrics is not served");
                return;
            }
            self.accept_until_unblocked(&pool, queue);
            pool.stop();
        });
    }
}

/// The connections accepted and the workers that serve them.
struct Pool {
    waiting: Mutex<Receiver<TcpStream>>,
    /// Connections accepted and not finished (waiting or being served).
    open: AtomicUsize,
    /// Each worker's connection being served (a clone, to shut it down
    /// when the listener stops).
    serving: Vec<Mutex<Option<TcpStream>>>,
    stopping: AtomicBool,
}

impl Pool {
    fn work(&self, me: usize, limits: &Limits, exposition: &(dyn Fn() -> Option<Arc<str>> + Sync)) {
        loop {
            let next = self
                .waiting
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .recv();
            let Ok(stream) = next else {
                return; // the listener stopped
            };
            if !self.stopping.load(Ordering::Acquire) {
                *self.slot(me) = stream.try_clone().ok();
                // Stopping may have begun before the clone was in place.
                if !self.stopping.load(Ordering::Acquire) {
                    exchange::serve(stream, limits, exposition);
                }
                *self.slot(me) = None;
            }
            self.open.fetch_sub(1, Ordering::AcqRel);
        }
    }

    fn slot(&self, worker: usize) -> std::sync::MutexGuard<'_, Option<TcpStream>> {
        self.serving[worker]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Ends the connections being served, so that the workers return
    /// before their timeouts (the queue's sender is dropped already).
    fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
        for w in 0..self.serving.len() {
            if let Some(s) = self.slot(w).as_ref() {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
    }
}

impl MetricsListener {
    /// Accepts connections and hands them to the pool until the
    /// unblocker writes the wake descriptor.
    fn accept_until_unblocked(&self, pool: &Pool, queue: SyncSender<TcpStream>) {
        let mut errors = ErrorLog::default();
        let mut pause: Option<Timespec> = None;
        loop {
            let (readable, woken) = {
                let mut fds = [
                    PollFd::new(&self.listener, PollFlags::IN),
                    PollFd::new(&*self.wake, PollFlags::IN),
                ];
                // After an accept error, only the wake descriptor for a
                // moment: the listener stays readable while the cause lasts.
                let watched = if pause.is_some() {
                    &mut fds[1..]
                } else {
                    &mut fds[..]
                };
                match poll(watched, pause.as_ref()) {
                    Ok(_) => {}
                    Err(rustix::io::Errno::INTR) => continue,
                    Err(e) => {
                        errors.note(&format!("poll: {e}"));
                        pause = Some(timespec(ACCEPT_RETRY));
                        continue;
                    }
                }
                let woken = !fds[1].revents().is_empty();
                let readable = pause.is_some() || !fds[0].revents().is_empty();
                (readable, woken)
            };
            if woken {
                return;
            }
            pause = None;
            if !readable {
                continue;
            }
            // Everything waiting, then back to poll.
            loop {
                match self.listener.accept() {
                    Ok((stream, _)) => self.admit(pool, &queue, stream),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e)
                        if matches!(
                            e.kind(),
                            ErrorKind::Interrupted | ErrorKind::ConnectionAborted
                        ) => {}
                    Err(e) => {
                        errors.note(&format!("accept: {e}"));
                        pause = Some(timespec(ACCEPT_RETRY));
                        break;
                    }
                }
            }
        }
    }

    /// Queues a connection for the workers, or answers 503 when
    /// [`Limits::max_connections`] are open already.
    fn admit(&self, pool: &Pool, queue: &SyncSender<TcpStream>, stream: TcpStream) {
        if pool.open.load(Ordering::Acquire) >= self.limits.max_connections {
            exchange::refuse_busy(stream);
            return;
        }
        pool.open.fetch_add(1, Ordering::AcqRel);
        match queue.try_send(stream) {
            Ok(()) => {}
            Err(TrySendError::Full(stream) | TrySendError::Disconnected(stream)) => {
                pool.open.fetch_sub(1, Ordering::AcqRel);
                exchange::refuse_busy(stream);
            }
        }
    }
}

fn timespec(d: Duration) -> Timespec {
    Timespec {
        tv_sec: d.as_secs() as _,
        tv_nsec: d.subsec_nanos() as _,
    }
}

/// Logs listener errors, at most once per [`ERROR_LOG_EVERY`].
#[derive(Default)]
struct ErrorLog {
    last: Option<Instant>,
    unlogged: u64,
}

impl ErrorLog {
    fn note(&mut self, what: &str) {
        let now = Instant::now();
        if self.last.is_some_and(|t| now - t < ERROR_LOG_EVERY) {
            self.unlogged += 1;
            return;
        }
        if self.unlogged > 0 {
            tracing::warn!(
                "metrics listener: {what} (and {} more errors since the last report); \
                 still listening",
                self.unlogged
            );
        } else {
            tracing::warn!("metrics listener: {what}; still listening");
        }
        self.last = Some(now);
        self.unlogged = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// A listener on loopback with `limits`, serving `text` on its own
    /// thread until the returned guard is dropped.
    struct Serving {
        addr: SocketAddr,
        unblock: Box<dyn Fn() + Send + Sync>,
        thread: Option<std::thread::JoinHandle<()>>,
    }

    impl Drop for Serving {
        fn drop(&mut self) {
            (self.unblock)();
            if let Some(t) = self.thread.take() {
                t.join().unwrap();
            }
        }
    }

    fn serving(limits: Limits) -> Serving {
        let l = MetricsListener::bind_with("127.0.0.1:0".parse().unwrap(), limits).unwrap();
        let addr = l.local_addr().unwrap();
        let unblock = l.unblocker();
        let thread = std::thread::spawn(move || {
            Box::new(l).serve(&|| Some("hetsched_up 1\n# EOF\n".into()));
        });
        Serving {
            addr,
            unblock,
            thread: Some(thread),
        }
    }

    fn get(addr: SocketAddr) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        text
    }

    #[test]
    fn a_scrape_is_answered_and_the_listener_stops_when_unblocked() {
        let s = serving(Limits::default());
        let text = get(s.addr);
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        assert!(text.contains("Content-Length: 20\r\n"), "{text}");
        assert!(text.ends_with("hetsched_up 1\n# EOF\n"), "{text}");
        drop(s); // joins
    }

    #[test]
    fn a_slow_client_is_dropped_and_others_are_served_meanwhile() {
        let s = serving(Limits {
            timeout: Duration::from_millis(300),
            workers: 2,
            ..Limits::default()
        });
        // Sends half a request and waits.
        let mut slow = TcpStream::connect(s.addr).unwrap();
        slow.write_all(b"GET /met").unwrap();
        assert!(get(s.addr).starts_with("HTTP/1.1 200"));
        slow.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut text = String::new();
        slow.read_to_string(&mut text).unwrap();
        assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    }

    #[test]
    fn connections_over_the_cap_are_answered_503() {
        let s = serving(Limits {
            max_connections: 2,
            workers: 1,
            ..Limits::default()
        });
        // Two connections that send nothing: one being served, one waiting.
        let held: Vec<TcpStream> = (0..2)
            .map(|_| TcpStream::connect(s.addr).unwrap())
            .collect();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let text = get(s.addr);
            if text.starts_with("HTTP/1.1 503") {
                break;
            }
            // The listener may not have accepted both held ones yet.
            assert!(text.starts_with("HTTP/1.1 200"), "{text}");
            assert!(Instant::now() < deadline, "never refused");
        }
        drop(held);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !get(s.addr).starts_with("HTTP/1.1 200") {
            assert!(Instant::now() < deadline, "never served again");
        }
    }

    #[test]
    fn an_oversized_head_is_refused_431() {
        let s = serving(Limits::default());
        let mut c = TcpStream::connect(s.addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut head = b"GET /metrics HTTP/1.1\r\nX: ".to_vec();
        head.resize(9 << 10, b'a');
        // The listener may close before all of it is written.
        let _ = c.write_all(&head);
        let mut text = String::new();
        let _ = c.read_to_string(&mut text);
        assert!(text.starts_with("HTTP/1.1 431"), "{text}");
    }
}
