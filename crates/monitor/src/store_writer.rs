//! Writes the settings store off the state lock, coalesced.
//!
//! A settings change used to rewrite and fsync the state file while the
//! change's connection held the global lock, with no limit on how often:
//! one unprivileged client changing its own settings 1,636 times a second
//! pushed another client's p99 round trip from 214 µs to 3.2 ms. Now the
//! lock is held only to hand a copy of the changed store to this writer
//! ([`StoreWriter::submit`]); its own thread writes the latest copy it has,
//! at most once per [`MIN_INTERVAL`] (the first change after a quiet spell
//! is written at once). Copies handed in meanwhile replace each other, so a
//! burst of changes costs a few writes a second and the file ends with the
//! last state.
//!
//! The timer thread could have done the writing, but it is the thread that
//! ends emulated device work and polls the call rings on time; an fsync
//! there (milliseconds on a disk) would delay both.

use crate::store::SettingsStore;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Shortest time between the starts of two writes: at most five a second.
pub const MIN_INTERVAL: Duration = Duration::from_millis(200);

/// After a failed write (disk full, directory gone), how long until the
/// writer tries again if nothing asks it to sooner.
const RETRY_AFTER: Duration = Duration::from_secs(5);

/// What the writer and the threads handing it stores share.
#[derive(Default)]
struct Slot {
    /// The latest store handed in and not yet written.
    pending: Option<SettingsStore>,
    /// How many stores were handed in; the last is number `submitted`.
    submitted: u64,
    /// The number of the last store that reached the disk.
    written: u64,
    /// Writes that succeeded.
    writes: u64,
    /// Someone waits in [`StoreFlush::flush`]: write now.
    flush: bool,
    /// The owner is gone: write what is pending, then end.
    stop: bool,
    /// The thread has ended: nothing handed in now will be written.
    ended: bool,
}

struct Inner {
    path: PathBuf,
    interval: Duration,
    slot: Mutex<Slot>,
    /// Signalled when a store is handed in, a flush or stop is asked for,
    /// and after every write.
    changed: Condvar,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The writer: its thread and the slot it takes stores from. Dropping it
/// writes what is pending and joins the thread.
pub struct StoreWriter {
    inner: Arc<Inner>,
    thread: Option<JoinHandle<()>>,
}

/// Lets another thread (the one that handles SIGTERM) wait until the
/// latest store is on disk.
#[derive(Clone)]
pub struct StoreFlush {
    inner: Arc<Inner>,
}

impl StoreWriter {
    /// Starts the thread that writes to `path`, at most once per `interval`.
    pub fn spawn(path: PathBuf, interval: Duration) -> std::io::Result<StoreWriter> {
        let inner = Arc::new(Inner {
            path,
            interval,
            slot: Mutex::new(Slot::default()),
            changed: Condvar::new(),
        });
        let for_thread = Arc::clone(&inner);
        let thread = std::thread::Builder::new()
            .name("hetsched-store".into())
            .spawn(move || run(&for_thread))?;
        Ok(StoreWriter {
            inner,
            thread: Some(thread),
        })
    }

    /// Hands in the store to write, replacing any not yet written. Takes
    /// only the writer's own lock, never across file I/O.
    pub fn submit(&self, store: SettingsStore) {
        let mut slot = self.inner.lock();
        let was_idle = slot.pending.replace(store).is_none();
        slot.submitted += 1;
        drop(slot);
        // With a store already pending the writer needs no wake-up: it
        // takes whatever is latest when its interval is up.
        if was_idle {
            self.inner.changed.notify_all();
        }
    }

    /// A handle for waiting until what was handed in is written.
    pub fn flusher(&self) -> StoreFlush {
        StoreFlush {
            inner: Arc::clone(&self.inner),
        }
    }

    /// Writes that succeeded so far.
    pub fn writes(&self) -> u64 {
        self.inner.lock().writes
    }
}

impl StoreFlush {
    /// Writes the latest store handed in now (not waiting out the
    /// interval) and waits up to `timeout` for it to be on disk; true if
    /// it is (or nothing was pending).
    pub fn flush(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut slot = self.inner.lock();
        let target = slot.submitted;
        if slot.written >= target {
            return true;
        }
        // Asked once: after a failed try the writer waits its retry delay
        // rather than spinning on a disk that refuses.
        slot.flush = true;
        self.inner.changed.notify_all();
        while slot.written < target {
            let now = Instant::now();
            if now >= deadline || slot.ended {
                return false;
            }
            slot = self
                .inner
                .changed
                .wait_timeout(slot, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        true
    }
}

impl Drop for StoreWriter {
    fn drop(&mut self) {
        self.inner.lock().stop = true;
        self.inner.changed.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The writer thread.
fn run(inner: &Inner) {
    write_until_stopped(inner);
    inner.lock().ended = true;
    inner.changed.notify_all();
}

fn write_until_stopped(inner: &Inner) {
    // When the next write may start.
    let mut not_before = Instant::now();
    // The last failure, said once until a write succeeds again.
    let mut failing: Option<String> = None;
    let mut slot = inner.lock();
    loop {
        while slot.pending.is_none() && !slot.stop {
            slot = inner
                .changed
                .wait(slot)
                .unwrap_or_else(PoisonError::into_inner);
        }
        if slot.pending.is_none() {
            return; // stopped with nothing left to write
        }
        // Coalesce: copies handed in while waiting replace this one.
        loop {
            let now = Instant::now();
            if now >= not_before || slot.flush || slot.stop {
                break;
            }
            slot = inner
                .changed
                .wait_timeout(slot, not_before - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        let store = slot.pending.take().expect("checked above");
        let number = slot.submitted;
        slot.flush = false;
        drop(slot);

        let started = Instant::now();
        let result = store.save(&inner.path);

        slot = inner.lock();
        match result {
            Ok(()) => {
                slot.written = slot.written.max(number);
                slot.writes += 1;
                not_before = started + inner.interval;
                if failing.take().is_some() {
                    tracing::info!("state file {} written again", inner.path.display());
                }
            }
            Err(e) => {
                let message = e.to_string();
                if failing.as_deref() != Some(&message) {
                    tracing::error!("{message}; trying again in {RETRY_AFTER:?}");
                }
                failing = Some(message);
                not_before = Instant::now() + RETRY_AFTER;
                if slot.stop {
                    // Stopping: one try is all there is time for.
                    slot.pending = None;
                } else if slot.pending.is_none() {
                    slot.pending = Some(store);
                }
            }
        }
        inner.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{ProcessKey, last_good_path};
    use hetsched_core::policy::{ClientSettings, ShareClass};
    use std::path::Path;

    fn store_with(shares: u32) -> SettingsStore {
        let mut store = SettingsStore::default();
        let settings = ClientSettings {
            class: ShareClass::Custom { shares },
            priority: 0,
        };
        let key = ProcessKey {
            pid: 9,
            start_time: 1,
        };
        store.set(key, "app", "gpu0", settings);
        store
    }

    /// Waits until `done`, failing the test after 10 s.
    fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::yield_now();
        }
    }

    fn on_disk(path: &Path) -> Option<SettingsStore> {
        SettingsStore::load(path).ok().filter(|s| !s.is_empty())
    }

    #[test]
    fn a_burst_of_changes_costs_a_few_writes_and_ends_with_the_last_state() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        let writer = StoreWriter::spawn(path.clone(), MIN_INTERVAL).unwrap();
        let n = 2_000;
        let started = Instant::now();
        for shares in 1..=n {
            writer.submit(store_with(shares));
        }
        let burst = started.elapsed();
        // The last store reaches the disk without anyone asking for it.
        wait_until("the last state on disk", || {
            on_disk(&path) == Some(store_with(n))
        });
        let writes = writer.writes();
        // The first write starts at once; the rest at most one per
        // interval during the burst, plus the one after it.
        let allowed = 2 + (burst.as_millis() / MIN_INTERVAL.as_millis()) as u64;
        assert!(
            writes <= allowed,
            "{writes} writes for {n} changes in {burst:?} (at most {allowed})"
        );
        assert!(writes < n as u64 / 10, "{writes} writes for {n} changes");
        // The fallback beside it is a complete earlier state.
        let last = SettingsStore::load(&last_good_path(&path)).unwrap();
        assert!(writes < 2 || last != SettingsStore::default(), "{last:?}");
    }

    #[test]
    fn flush_writes_at_once_and_drop_writes_what_is_pending() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        // An interval no test waits out: only flush and drop write.
        let writer = StoreWriter::spawn(path.clone(), Duration::from_secs(3600)).unwrap();
        let flusher = writer.flusher();
        assert!(flusher.flush(Duration::from_secs(10)), "nothing pending");
        writer.submit(store_with(1));
        wait_until("the first write", || writer.writes() == 1);
        writer.submit(store_with(2));
        writer.submit(store_with(3));
        assert!(flusher.flush(Duration::from_secs(10)));
        assert_eq!(writer.writes(), 2);
        assert_eq!(on_disk(&path), Some(store_with(3)));
        writer.submit(store_with(4));
        drop(writer);
        assert_eq!(on_disk(&path), Some(store_with(4)));
        assert!(flusher.flush(Duration::from_secs(1)), "written at drop");
    }

    #[test]
    fn a_failed_write_is_retried_and_flush_reports_it() {
        let dir = tempfile::tempdir().unwrap();
        // A file where the state file's directory should be.
        let blocker = dir.path().join("sub");
        std::fs::write(&blocker, "").unwrap();
        let path = blocker.join("state.json");
        let writer = StoreWriter::spawn(path.clone(), MIN_INTERVAL).unwrap();
        writer.submit(store_with(5));
        assert!(!writer.flusher().flush(Duration::from_millis(300)));
        assert_eq!(writer.writes(), 0);
        std::fs::remove_file(&blocker).unwrap();
        assert!(writer.flusher().flush(Duration::from_secs(10)));
        assert_eq!(on_disk(&path), Some(store_with(5)));
    }
}
