//! A `SharedClient` whose last reference is dropped by one of its own
//! reply callbacks (so on its reader thread) shuts down cleanly: the
//! reader cannot join itself, and must not panic trying.

use hetsched_monitor::embedded::MonitorHandle;
use hetsched_protocol::{ClientOptions, SharedClient};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

#[test]
fn a_client_dropped_by_its_own_reply_callback_ends_without_a_panic() {
    let monitor = MonitorHandle::from_config(None).unwrap();
    let client = Arc::new(
        SharedClient::connect(
            ClientOptions::application("self-drop")
                .unwrap()
                .socket(monitor.socket()),
        )
        .unwrap(),
    );
    let unit = client.units()[0].id;
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (done_tx, done_rx) = mpsc::channel::<std::thread::ThreadId>();
    // The callback holds a reference, waits until the test has dropped
    // its own, then drops the last one on the reader thread.
    let held = Mutex::new(Some(Arc::clone(&client)));
    client
        .request_dispatch_with(
            unit,
            0,
            Box::new(move |_reply| {
                go_rx.recv().unwrap();
                let last = held.lock().unwrap().take().unwrap();
                assert_eq!(
                    Arc::strong_count(&last),
                    1,
                    "the callback holds the last one"
                );
                drop(last);
                done_tx.send(std::thread::current().id()).unwrap();
            }),
        )
        .unwrap();
    drop(client);
    go_tx.send(()).unwrap();
    let reader = done_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the callback finished: dropping the client on its reader thread did not panic");
    assert_ne!(reader, std::thread::current().id());
}
