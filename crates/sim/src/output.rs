//! STUB — replaced by the output helper.
