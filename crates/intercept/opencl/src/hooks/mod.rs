//! The layer's replacements of dispatch-table entries.

mod launch;
mod memory;
mod queues;

/// (dispatch index, address of this layer's function) for every entry
/// the layer governs.
pub fn replacements() -> Vec<(usize, usize)> {
    let mut all = launch::replacements();
    all.extend(memory::replacements());
    all.extend(queues::replacements());
    all
}
