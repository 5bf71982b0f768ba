//! Capability fallbacks, counted per thread and CPU, for the thread
//! balancer's functional kinship (Kinship §3.4: faults a thread takes on a
//! core that lacks an instruction it uses).
//!
//! A program that checks for an instruction set extension before using it
//! (AES-NI, AVX-512 …) and takes a slower software path when the core it
//! runs on lacks it calls [`report_fallback`] on that path. The counts go
//! to a small per-process file, the *ledger*, that `hetsched balance` reads
//! every epoch for the processes it balances; it charges the faults to the
//! core each was taken on, and Kinship then keeps the thread off cores with
//! the same capabilities.
//!
//! The ledger is `hetsched-faults.PID` in `$HETSCHED_FAULT_DIR`, else
//! `/dev/shm`: an array of fixed 32-byte records, one per (thread, CPU) a
//! fallback was taken on, each holding the running count. A thread owns
//! its records and rewrites one with a single positioned write, at most
//! every [`FLUSH_EVERY`] per record, so reporting costs a clock read and no
//! lock. Readers skip records whose check word does not match (a write
//! seen half-done) and keep the last good count.
//!
//! Trust: a process can only report about itself. The balancer reads a
//! ledger only when the file belongs to the user the process runs as, so
//! nobody can charge faults to another user's threads; a process that lies
//! about its own fallbacks only moves its own threads.

use hetsched_core::balance::Category;
use std::cell::RefCell;
use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Bytes per record.
pub const RECORD_BYTES: usize = 32;
/// Records per ledger: (thread, CPU) pairs beyond this are not reported.
pub const MAX_RECORDS: u32 = 4096;
/// How often one record is rewritten at most while its thread reports.
pub const FLUSH_EVERY: Duration = Duration::from_millis(5);
/// Environment variable naming the ledger directory.
pub const DIR_ENV: &str = "HETSCHED_FAULT_DIR";
const DEFAULT_DIR: &str = "/dev/shm";
const MAGIC: u64 = 0x6873_6661_756c_7473;

/// The directory ledgers are kept in.
pub fn ledger_dir() -> PathBuf {
    std::env::var_os(DIR_ENV).map_or_else(|| PathBuf::from(DEFAULT_DIR), PathBuf::from)
}

/// Where process `pid` keeps its ledger.
pub fn ledger_path(dir: &Path, pid: u32) -> PathBuf {
    dir.join(format!("hetsched-faults.{pid}"))
}

/// One thread's fallbacks on one CPU since it first reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultRecord {
    pub tid: u32,
    /// OS index of the CPU the fallbacks were taken on.
    pub cpu: u32,
    /// What the fallbacks were for, OR-ed.
    pub categories: Category,
    pub count: u64,
}

impl FaultRecord {
    fn check(&self) -> u64 {
        MAGIC
            ^ self.count.rotate_left(17)
            ^ (u64::from(self.tid) << 32 | u64::from(self.cpu))
            ^ u64::from(self.categories.0).rotate_right(8)
    }

    /// The record's bytes: tid, cpu, categories (u32 each, little-endian),
    /// a reserved word, the count and the check word (u64 each).
    pub fn encode(&self) -> [u8; RECORD_BYTES] {
        let mut out = [0u8; RECORD_BYTES];
        out[0..4].copy_from_slice(&self.tid.to_le_bytes());
        out[4..8].copy_from_slice(&self.cpu.to_le_bytes());
        out[8..12].copy_from_slice(&u32::from(self.categories.0).to_le_bytes());
        out[16..24].copy_from_slice(&self.count.to_le_bytes());
        out[24..32].copy_from_slice(&self.check().to_le_bytes());
        out
    }

    /// The record in `bytes`, or `None` for an unused slot, a record seen
    /// half-written, or one that is not a record at all.
    pub fn decode(bytes: &[u8; RECORD_BYTES]) -> Option<FaultRecord> {
        let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        let categories = u8::try_from(u32_at(8)).ok()?;
        let r = FaultRecord {
            tid: u32_at(0),
            cpu: u32_at(4),
            categories: Category(categories),
            count: u64_at(16),
        };
        (r.tid != 0 && u32_at(12) == 0 && u64_at(24) == r.check()).then_some(r)
    }
}

/// Every valid record in a ledger's bytes, in slot order; a trailing
/// partial record and records that do not check are left out.
pub fn decode(bytes: &[u8]) -> Vec<FaultRecord> {
    bytes
        .chunks_exact(RECORD_BYTES)
        .take(MAX_RECORDS as usize)
        .filter_map(|c| FaultRecord::decode(c.try_into().expect("exact chunk")))
        .collect()
}

/// Why a ledger could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} belongs to uid {owner}, not to the process's uid {expected}: ignored")]
    ForeignOwner {
        path: PathBuf,
        owner: u32,
        expected: u32,
    },
}

/// The records of process `pid`'s ledger in `dir`, if it has one, when the
/// file belongs to `uid` (the user the process runs as). No ledger is
/// `Ok(empty)`: most processes never fall back.
pub fn read(dir: &Path, pid: u32, uid: u32) -> Result<Vec<FaultRecord>, LedgerError> {
    let path = ledger_path(dir, pid);
    let io = |source| LedgerError::Io {
        path: path.clone(),
        source,
    };
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(e)),
    };
    let owner = file.metadata().map_err(io)?.uid();
    if owner != uid {
        return Err(LedgerError::ForeignOwner {
            path,
            owner,
            expected: uid,
        });
    }
    let mut bytes = vec![0u8; MAX_RECORDS as usize * RECORD_BYTES];
    let mut filled = 0;
    while filled < bytes.len() {
        match file.read_at(&mut bytes[filled..], filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io(e)),
        }
    }
    Ok(decode(&bytes[..filled]))
}

/// This process's open ledger, or `None` when it cannot have one (the
/// directory is not writable, or a file of that name belongs to someone
/// else).
struct Ledger {
    file: File,
    next_slot: AtomicU32,
}

static LEDGER: OnceLock<Option<Ledger>> = OnceLock::new();

fn open_own() -> Option<Ledger> {
    let path = ledger_path(&ledger_dir(), std::process::id());
    // A file of our pid is a previous process's (pids are reused): it is
    // stale. Removing it fails for someone else's file in a sticky
    // directory, and then the exclusive create refuses it too.
    let _ = std::fs::remove_file(&path);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(&path)
        .ok()?;
    Some(Ledger {
        file,
        next_slot: AtomicU32::new(0),
    })
}

/// One (CPU) record of the calling thread.
struct Slot {
    cpu: u32,
    index: u32,
    record: FaultRecord,
    written: Option<Instant>,
}

thread_local! {
    static SLOTS: RefCell<Vec<Slot>> = const { RefCell::new(Vec::new()) };
}

/// Counts one fallback of the calling thread, on the CPU it runs on, for
/// work of `category` (e.g. [`Category::CRYPTO`] for software AES on a
/// core without AES-NI). Cheap enough to call per fallback; does nothing
/// when the process cannot keep a ledger.
pub fn report_fallback(category: Category) {
    let Some(ledger) = LEDGER.get_or_init(open_own) else {
        return;
    };
    let cpu = rustix::thread::sched_getcpu() as u32;
    SLOTS.with_borrow_mut(|slots| {
        let at = match slots.iter().position(|s| s.cpu == cpu) {
            Some(at) => at,
            None => {
                let index = ledger.next_slot.fetch_add(1, Ordering::Relaxed);
                if index >= MAX_RECORDS {
                    return;
                }
                let tid = rustix::thread::gettid().as_raw_nonzero().get() as u32;
                slots.push(Slot {
                    cpu,
                    index,
                    record: FaultRecord {
                        tid,
                        cpu,
                        categories: Category::GENERAL,
                        count: 0,
                    },
                    written: None,
                });
                slots.len() - 1
            }
        };
        let slot = &mut slots[at];
        slot.record.count += 1;
        slot.record.categories = slot.record.categories.union(category);
        if slot.written.is_none_or(|w| w.elapsed() >= FLUSH_EVERY) {
            let offset = u64::from(slot.index) * RECORD_BYTES as u64;
            // A failed write loses a report, never the program's work.
            let _ = ledger.file.write_at(&slot.record.encode(), offset);
            slot.written = Some(Instant::now());
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(tid: u32, cpu: u32, count: u64) -> FaultRecord {
        FaultRecord {
            tid,
            cpu,
            categories: Category::CRYPTO,
            count,
        }
    }

    #[test]
    fn records_round_trip_and_damaged_ones_are_skipped() {
        let r = record(4242, 3, 1_000_001);
        assert_eq!(FaultRecord::decode(&r.encode()), Some(r));
        // A write seen half-done: the new count's low half, the old check.
        let mut torn = r.encode();
        torn[16..20].copy_from_slice(&7u32.to_le_bytes());
        assert_eq!(FaultRecord::decode(&torn), None);
        // An unused slot.
        assert_eq!(FaultRecord::decode(&[0; RECORD_BYTES]), None);
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&record(1, 0, 5).encode());
        bytes.extend_from_slice(&[0; RECORD_BYTES]);
        bytes.extend_from_slice(&torn);
        bytes.extend_from_slice(&record(2, 1, 9).encode());
        bytes.extend_from_slice(&[0xff; 7]);
        assert_eq!(decode(&bytes), vec![record(1, 0, 5), record(2, 1, 9)]);
    }

    #[test]
    fn a_ledger_of_another_user_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(ledger_path(dir.path(), 77), record(5, 1, 3).encode()).unwrap();
        let me = rustix::process::getuid().as_raw();
        assert_eq!(read(dir.path(), 77, me).unwrap(), vec![record(5, 1, 3)]);
        assert!(matches!(
            read(dir.path(), 77, me.wrapping_add(1)),
            Err(LedgerError::ForeignOwner { .. })
        ));
        assert!(read(dir.path(), 78, me).unwrap().is_empty());
    }

    #[test]
    fn a_thread_reports_its_fallbacks_on_the_cpu_it_runs_on() {
        let dir = ledger_dir();
        let tid = rustix::thread::gettid().as_raw_nonzero().get() as u32;
        report_fallback(Category::CRYPTO);
        report_fallback(Category::VECTOR);
        let me = rustix::process::getuid().as_raw();
        let records = read(&dir, std::process::id(), me).unwrap();
        let _ = std::fs::remove_file(ledger_path(&dir, std::process::id()));
        let mine: Vec<&FaultRecord> = records.iter().filter(|r| r.tid == tid).collect();
        assert!(!mine.is_empty(), "{records:?}");
        // The first report is written at once; the second may wait for
        // the next flush.
        assert!(
            mine.iter()
                .all(|r| r.count >= 1 && r.categories.contains(Category::CRYPTO))
        );
    }
}
