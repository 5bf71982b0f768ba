//! Shared-memory views.
