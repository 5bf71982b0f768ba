//! What `hetsched units` shows of the machine's NVIDIA GPUs. The runtime's
//! CUDA executor drives them, so they are listed beside the daemon's units
//! (`gpus`), not among them; with `cuda_units = true` the daemon serves
//! them too, under `served`. A build without CUDA shows none.

use anyhow::Result;

/// The GPUs' part of `hetsched units`.
#[derive(Debug, Default)]
pub struct GpuListing {
    /// Fields of the `--json` object (`gpus`, `gpu_notes`).
    pub json: Vec<(&'static str, serde_json::Value)>,
    /// The table of the text output.
    pub table: String,
    /// One line each, after the platform's notes.
    pub notes: Vec<String>,
}

/// The GPUs of this machine: in a CUDA build, those NVML (or the CUDA
/// driver) finds; else none.
pub fn discover() -> Result<GpuListing> {
    let listing = GpuListing::default();
    #[cfg(feature = "cuda")]
    let listing = {
        let mut listing = listing;
        let gpus = hetsched_platform::gpu::discover();
        listing
            .json
            .push(("gpus", serde_json::to_value(&gpus.gpus)?));
        listing
            .json
            .push(("gpu_notes", serde_json::to_value(&gpus.notes)?));
        listing.table = gpus.table();
        listing.notes = gpus.notes;
        listing
    };
    Ok(listing)
}
