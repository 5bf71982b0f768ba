//! Threads of the test process that the balancer's tests pin, journal and
//! restore.

use crate::targets::ThreadId;
use std::sync::mpsc::{Sender, channel};
use std::thread::JoinHandle;

/// A thread of this process that waits until [`IdleThread::end`].
pub struct IdleThread {
    pub id: ThreadId,
    done: Sender<()>,
    handle: JoinHandle<()>,
}

impl IdleThread {
    pub fn spawn() -> IdleThread {
        let (tx, rx) = channel();
        let (done, done_rx) = channel::<()>();
        let handle = std::thread::spawn(move || {
            tx.send(rustix::thread::gettid().as_raw_nonzero().get() as u32)
                .unwrap();
            let _ = done_rx.recv();
        });
        let tid = rx.recv().unwrap();
        IdleThread {
            id: ThreadId {
                pid: std::process::id(),
                tid,
            },
            done,
            handle,
        }
    }

    /// Lets the thread exit and joins it.
    pub fn end(self) {
        let _ = self.done.send(());
        self.handle.join().unwrap();
    }
}
