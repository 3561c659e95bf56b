//! The server's connections, held to limits a slow or hostile client cannot stretch: a request's
//! head must arrive within a deadline (also between requests on a kept-alive connection) and its
//! body within another; at most `max_connections` are open, below the file-descriptor limit, and a
//! new one past the cap takes the place of the longest-waiting connection that has no request in
//! service (a half-sent head, an idle keep-alive), or is refused with a 503 when every connection
//! is busy. Shutting down, connections finish what they serve for a short grace, then close.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Json, Response};
use futures_util::FutureExt;
use hyper_util::rt::{TokioIo, TokioTimer};
use songloom_wire::ErrorBody;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;
use tower::ServiceExt;

/// File descriptors kept free of connections: the engine's model files, the library's database,
/// the songs being written.
pub const RESERVED_FDS: u64 = 128;

/// How many connections may be open at once when the process may open `fd_limit` files.
pub fn max_connections(fd_limit: u64) -> usize {
    fd_limit.saturating_sub(RESERVED_FDS).clamp(16, 1024) as usize
}

#[derive(Clone, Copy)]
pub struct Limits {
    pub max_connections: usize,
    /// For a request's head (and for the next one on a kept-alive connection), and then its body.
    pub request_timeout: Duration,
    /// How long open connections may go on after shutdown starts.
    pub shutdown_grace: Duration,
}

/// One open connection.
struct Connection {
    /// Requests whose response is not yet fully sent.
    in_service: AtomicUsize,
    evicted: Notify,
}

/// Marks a connection busy while a request is served, until its response body is dropped.
struct InService(Arc<Connection>);

impl InService {
    fn new(connection: Arc<Connection>) -> InService {
        connection.in_service.fetch_add(1, Ordering::SeqCst);
        InService(connection)
    }
}

impl Drop for InService {
    fn drop(&mut self) {
        self.0.in_service.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A response body that keeps its connection marked busy until it is sent or dropped.
struct Counted {
    body: Body,
    _in_service: InService,
}

impl http_body::Body for Counted {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// The open connections, oldest first.
#[derive(Default)]
struct Open {
    by_age: Mutex<(u64, BTreeMap<u64, Arc<Connection>>)>,
}

impl Open {
    fn add(&self) -> (u64, Arc<Connection>) {
        let mut open = self.by_age.lock().expect("not poisoned");
        let connection = Arc::new(Connection { in_service: AtomicUsize::new(0), evicted: Notify::new() });
        open.0 += 1;
        let id = open.0;
        open.1.insert(id, connection.clone());
        (id, connection)
    }

    fn remove(&self, id: u64) {
        self.by_age.lock().expect("not poisoned").1.remove(&id);
    }

    fn count(&self) -> usize {
        self.by_age.lock().expect("not poisoned").1.len()
    }

    /// Closes the oldest connection with nothing in service; false if every one is busy.
    fn evict_one_idle(&self) -> bool {
        let mut open = self.by_age.lock().expect("not poisoned");
        let idle = open.1.iter().find(|(_, c)| c.in_service.load(Ordering::SeqCst) == 0).map(|(&id, _)| id);
        match idle.and_then(|id| open.1.remove(&id)) {
            Some(connection) => {
                connection.evicted.notify_one();
                true
            }
            None => false,
        }
    }
}

/// What a connection past the cap is told before it is closed. Written without waiting: a fresh
/// socket's send buffer holds it, and a client that reads nothing must not hold a task.
const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\n\
retry-after: 1\r\ncontent-length: 77\r\n\r\n{\"error\":\"the server has as many connections as it can hold; try again soon\"}";

/// Serves `app` on `listener` until `stop` resolves, then waits for `drained` (the songs in
/// progress cancelled, so their streams end) and lets connections finish for the grace.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    stop: impl Future<Output = ()>,
    drained: impl Future<Output = ()>,
) {
    let open = Arc::new(Open::default());
    let (stopping, stop_seen) = watch::channel(false);
    let mut tasks = JoinSet::new();
    let mut stop = pin!(stop);
    loop {
        while tasks.try_join_next().is_some() {}
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                // Out of file descriptors or a connection reset before it was taken: the cap
                // keeps the first rare; wait a moment rather than spin.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            },
            () = &mut stop => break,
        };
        if open.count() >= limits.max_connections && !open.evict_one_idle() {
            let _ = stream.try_write(BUSY);
            continue;
        }
        let (id, connection) = open.add();
        let (app, open, stop_seen) = (app.clone(), open.clone(), stop_seen.clone());
        tasks.spawn(async move {
            serve_connection(stream, app, connection, limits, stop_seen).await;
            open.remove(id);
        });
    }
    drop(listener);
    drained.await;
    let _ = stopping.send(true);
    let _ = tokio::time::timeout(limits.shutdown_grace, async { while tasks.join_next().await.is_some() {} }).await;
    tasks.abort_all();
}

async fn serve_connection(
    stream: TcpStream,
    app: Router,
    connection: Arc<Connection>,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let counted = connection.clone();
    let service = hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
        let in_service = InService::new(counted.clone());
        let response = app.clone().oneshot(request.map(Body::new));
        async move {
            let response = response.await.unwrap_or_else(|never: Infallible| match never {});
            Ok::<_, Infallible>(response.map(|body| Counted { body, _in_service: in_service }))
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(limits.request_timeout);
    let mut served = pin!(builder.serve_connection(TokioIo::new(stream), service));
    let mut stopping = pin!(stop.wait_for(|stop| *stop).fuse());
    loop {
        tokio::select! {
            _ = served.as_mut() => break,
            () = connection.evicted.notified() => break,
            _ = &mut stopping => served.as_mut().graceful_shutdown(),
        }
    }
}

/// Reads a request's body within the request timeout (a client that stops sending it gets a 408
/// instead of holding its connection), at most `limit_bytes` of it.
pub async fn body_in_time(
    State((timeout, limit_bytes)): State<(Duration, usize)>,
    request: Request,
    next: Next,
) -> Response {
    let (parts, body) = request.into_parts();
    let error = |status: StatusCode, error: String| (status, Json(ErrorBody { error })).into_response();
    let bytes = match tokio::time::timeout(timeout, axum::body::to_bytes(body, limit_bytes)).await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(e)) if std::error::Error::source(&e).is_some_and(|s| s.is::<http_body_util::LengthLimitError>()) => {
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the request body is too large (at most {limit_bytes} bytes)"),
            );
        }
        Ok(Err(e)) => return error(StatusCode::BAD_REQUEST, format!("the request body could not be read: {e}")),
        Err(_) => {
            return error(
                StatusCode::REQUEST_TIMEOUT,
                format!("the request body did not arrive within {} s", timeout.as_secs_f64()),
            );
        }
    };
    next.run(Request::from_parts(parts, Body::from(bytes))).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_stays_below_the_descriptor_limit() {
        assert_eq!(max_connections(1024), 896);
        assert_eq!(max_connections(1 << 20), 1024);
        assert_eq!(max_connections(100), 16);
    }

    #[test]
    fn the_busy_answer_is_one_json_line_of_its_length() {
        let text = std::str::from_utf8(BUSY).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.contains(&format!("content-length: {}", body.len())), "{}", body.len());
        let _: ErrorBody = serde_json::from_str(body).unwrap();
    }

    #[test]
    fn the_oldest_idle_connection_is_evicted_first() {
        let open = Open::default();
        let (first, a) = open.add();
        let (_, b) = open.add();
        let _busy = InService::new(a.clone());
        assert!(open.evict_one_idle());
        assert_eq!(open.count(), 1);
        assert_eq!(b.in_service.load(Ordering::SeqCst), 0);
        // `a` is busy and stays; nothing idle is left.
        assert!(!open.evict_one_idle());
        open.remove(first);
        assert_eq!(open.count(), 0);
    }
}
