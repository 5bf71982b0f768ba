//! Client protocol.
