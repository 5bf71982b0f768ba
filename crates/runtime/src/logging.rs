//! Where hetsched's log events go when the program has no `tracing`
//! subscriber of its own (the `hetsched` binary, C programs through the C
//! API, Python): stderr, filtered by `RUST_LOG` (`error`, `warn`, `info`,
//! `debug`, `trace`, or per crate: `hetsched_monitor=debug`). Under systemd
//! (`JOURNAL_STREAM` set) lines carry no timestamp, since the journal adds
//! its own, and no colours.

use tracing_subscriber::EnvFilter;

/// Installs the subscriber unless the process has one; `default` is the
/// filter without `RUST_LOG`.
pub fn init(default: &str) {
    let (filter, bad) = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.is_empty() => match EnvFilter::try_new(&spec) {
            Ok(f) => (f, None),
            Err(e) => (
                EnvFilter::new(default),
                Some(format!("RUST_LOG={spec:?} ignored: {e}")),
            ),
        },
        _ => (EnvFilter::new(default), None),
    };
    let journal = std::env::var_os("JOURNAL_STREAM").is_some();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(!journal && std::io::IsTerminal::is_terminal(&std::io::stderr()));
    // A program with its own subscriber keeps it.
    let _ = if journal {
        builder.without_time().try_init()
    } else {
        builder.try_init()
    };
    if let Some(bad) = bad {
        tracing::warn!("{bad}");
    }
}
