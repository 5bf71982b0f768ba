//! The hetsched client protocol.
//!
//! Clients talk to the daemon over a Unix stream socket in *frames*: a
//! five-byte header (payload length, little-endian `u32`, then the protocol
//! version byte) followed by a [postcard] payload holding one
//! [`ClientMsg`] or [`DaemonMsg`]. `docs/protocol.md` describes every
//! message; this crate is the only implementation of the encoding, shared
//! by the daemon, the client library ([`Client`]) and the fuzz target.

pub mod byte_size;
mod client;
mod frame;
mod kernel;
pub mod kernel_call;
mod kernel_signature;
mod message;
mod mux;
mod paths;
pub mod ptx;
mod socket;
mod status_json;
mod status_pages;
mod unit_info;
mod unit_view;
pub mod user_kernel;

pub use client::{
    CallRing, Client, ClientError, ClientOptions, DeviceDone, Grant, KernelRing, Lease,
    RegisteredKernel, Session,
};
pub use frame::{
    FRAME_HEADER_BYTES, FrameError, FrameReader, MAX_FRAME_BYTES, PROTOCOL_VERSION,
    STATUS_PAGE_BYTES, decode_client, decode_daemon, encode_frame, encoded_len,
};
pub use message::{
    ClientMsg, ClientStatus, ClientUnitStatus, CoordinatedApp, CoordinationStatus, DaemonMsg,
    DaemonStatus, DomainInfo, ErrorCode, InterceptApi, Role, SettingsRequest, StatusPage,
    StatusReport, UnitDemand, UnitInfo, UnitSelectionStatus, UnitStatus, WireClass, WireSettings,
};
pub use mux::{ReplyFn, SharedClient, TaskEvent, TaskReply};
pub use paths::{default_socket_path, parse_class, requested_settings_from_env};
pub use socket::{recv_with_fds, send_with_fds};
pub use status_json::{SCHEMA_VERSION, domain_of, status_json};
pub use unit_view::UnitView;
