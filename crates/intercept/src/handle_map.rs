//! Driver handles (command queues, streams) → the device they belong to:
//! read on every launch, written when a handle is made or let go.

use std::collections::HashMap;
use std::sync::RwLock;

/// A handle's address → its device index. Reads share the lock, so
/// launches on many threads do not wait for one another.
#[derive(Debug, Default)]
pub struct HandleMap {
    map: RwLock<Option<HashMap<usize, usize>>>,
}

impl HandleMap {
    pub const fn new() -> HandleMap {
        HandleMap {
            map: RwLock::new(None),
        }
    }

    /// The device of `handle`, if it is known.
    #[inline]
    pub fn get(&self, handle: usize) -> Option<usize> {
        self.map
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .and_then(|m| m.get(&handle).copied())
    }

    /// Runs `f` on the map under the write lock: launches wait meanwhile,
    /// and no handle is added or removed by anyone else.
    pub fn with_write<R>(&self, f: impl FnOnce(&mut HashMap<usize, usize>) -> R) -> R {
        let mut guard = self.map.write().unwrap_or_else(|e| e.into_inner());
        f(guard.get_or_insert_with(HashMap::new))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_map_to_their_devices_until_removed() {
        let m = HandleMap::new();
        assert_eq!(m.get(0x10), None);
        m.with_write(|map| {
            map.insert(0x10, 1);
            map.insert(0x20, 0);
        });
        assert_eq!(m.get(0x10), Some(1));
        m.with_write(|map| map.retain(|_, d| *d != 1));
        assert_eq!(m.get(0x10), None);
        assert_eq!(m.get(0x20), Some(0));
    }
}
