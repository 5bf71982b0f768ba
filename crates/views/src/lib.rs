//! Rinnegan's two pages in shared memory: the **global page** (every unit
//! and CPU kind, seen by every client) and one **private page** per client
//! (what that client can expect from each unit).
//!
//! The daemon is the single writer of each page. It creates the page as a
//! memfd, sizes it, maps it read-write and then seals it
//! (`F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL`), so a
//! client that receives the fd can map it read-only and nothing else.
//! Clients read it without locks and without system calls through a seqlock:
//! a read never sees half of one publish and half of another.
//!
//! ```
//! use hetsched_views::{GlobalReader, GlobalUnit, GlobalWriter};
//!
//! let mut writer = GlobalWriter::create(2, 0)?;
//! // In the daemon, `writer.fd()` goes to the client over the socket.
//! let reader = GlobalReader::from_fd(writer.fd().try_clone_to_owned()?)?;
//! let mut units = [GlobalUnit::default(); 2];
//! units[1].view.busy_fraction = 0.5;
//! writer.publish(1_000, &units, &[])?;
//! assert_eq!(reader.unit(1).unwrap().view.busy_fraction, 0.5);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The byte layout (slot offsets, version [`LAYOUT_VERSION`]) is in [`layout`].
//! All `unsafe` code (the `mmap` and the view of the mapping as atomics) is in
//! one private module, `mapping`.

pub mod call_ring;
pub mod data_region;
pub mod doorbell;
mod error;
mod global;
pub mod layout;
mod mapping;
mod page;
mod private;
mod seqlock;
mod slots;

pub use error::ViewError;
pub use global::{
    CLASS_BACKGROUND, CLASS_CUSTOM, CLASS_NORMAL, CpuKindView, GlobalPublish, GlobalReader,
    GlobalSnapshot, GlobalUnit, GlobalWriter, NICE_LEVELS, NICE_MIN,
};
pub use layout::{LAYOUT_VERSION, PageKind};
pub use private::{PrivateReader, PrivateSnapshot, PrivateWriter, Targets};
pub use seqlock::STALL_TIMEOUT;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod loom_models;
