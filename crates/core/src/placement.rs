//! Placement (owner: lead).
