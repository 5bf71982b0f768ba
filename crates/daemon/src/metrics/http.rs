//! `GET /metrics` over HTTP (tiny_http: one thread, one request at a
//! time, which is all a scraper needs).

use super::exposition::CONTENT_TYPE;
pub use hetsched_monitor::host::MetricsBindError;
use hetsched_monitor::host::MetricsHttp;
use std::net::SocketAddr;
use std::sync::Arc;
use tiny_http::{Header, Method, Response};

/// A bound metrics listener, not yet serving.
pub struct MetricsListener {
    http: Arc<tiny_http::Server>,
}

impl std::fmt::Debug for MetricsListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsListener")
            .field("addr", &self.http.server_addr().to_ip())
            .finish()
    }
}

impl MetricsListener {
    pub fn bind(addr: SocketAddr) -> Result<MetricsListener, MetricsBindError> {
        tiny_http::Server::http(addr)
            .map(|http| MetricsListener {
                http: Arc::new(http),
            })
            .map_err(|e| MetricsBindError {
                addr,
                why: e.to_string(),
            })
    }
}

impl MetricsHttp for MetricsListener {
    /// Where it listens (the port chosen when bound to port 0).
    fn local_addr(&self) -> Option<SocketAddr> {
        self.http.server_addr().to_ip()
    }

    /// Ends [`MetricsHttp::serve`] (from another thread).
    fn unblocker(&self) -> Box<dyn Fn() + Send + Sync> {
        let http = Arc::clone(&self.http);
        Box::new(move || http.unblock())
    }

    /// Answers requests until the unblocker's call.
    fn serve(self: Box<Self>, exposition: &dyn Fn() -> String) {
        for request in self.http.incoming_requests() {
            let path = request.url().split('?').next().unwrap_or("");
            let response = match (request.method(), path) {
                (Method::Get, "/metrics") => text(200, exposition(), CONTENT_TYPE),
                (Method::Get, "/") => text(
                    200,
                    "hetsched daemon: metrics at /metrics\n".into(),
                    "text/plain; charset=utf-8",
                ),
                (Method::Get, _) => text(404, "not found: try /metrics\n".into(), "text/plain"),
                _ => text(405, "only GET\n".into(), "text/plain"),
            };
            // A scraper that hung up gets nothing; the next one is served.
            let _ = request.respond(response);
        }
    }
}

fn text(status: u16, body: String, content_type: &str) -> Response<std::io::Cursor<Vec<u8>>> {
    let header = Header::from_bytes(&b"Content-Type"[..], content_type.as_bytes())
        .expect("a fixed ASCII header");
    Response::from_string(body)
        .with_status_code(status)
        .with_header(header)
}
