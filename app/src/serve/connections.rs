//! The server's connections, held to limits a slow or hostile client cannot stretch: a request's
//! head must arrive within a deadline (also between requests on a kept-alive connection) and its
//! body within another, and a client that takes none of a response for `write_stall` is let go; at
//! most `max_connections` are open, below the file-descriptor limit, and a new one past the cap
//! takes the place of the longest-quiet connection that has nothing in service and nothing left to
//! send (a half-sent head, an idle keep-alive), or is refused with a 503 when every connection is
//! busy. Shutting down, connections finish what they serve for a short grace, then close.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Json, Response};
use futures_util::FutureExt;
use hyper_util::rt::{TokioIo, TokioTimer};
use songloom_wire::ErrorBody;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
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
    /// How long a client may take none of a response it is sent before it is let go.
    pub write_stall: Duration,
    /// How long open connections may go on after shutdown starts.
    pub shutdown_grace: Duration,
}

/// Milliseconds since the server's first connection: the clock the connections' times are on.
fn now_ms() -> u64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64 + 1
}

/// One open connection.
struct Connection {
    /// Requests being served (until their response body is taken).
    in_service: AtomicUsize,
    /// When bytes last went either way.
    last_active_ms: AtomicU64,
    /// Since when the client has taken nothing of what is being sent; 0 while it takes it.
    write_blocked_since_ms: AtomicU64,
    evicted: Notify,
}

impl Connection {
    fn new() -> Connection {
        Connection {
            in_service: AtomicUsize::new(0),
            last_active_ms: AtomicU64::new(now_ms()),
            write_blocked_since_ms: AtomicU64::new(0),
            evicted: Notify::new(),
        }
    }

    /// Whether closing it loses nothing: no request in service, nothing waiting to be sent.
    fn is_idle(&self) -> bool {
        self.in_service.load(Ordering::SeqCst) == 0 && self.write_blocked_since_ms.load(Ordering::SeqCst) == 0
    }

    fn stalled_for(&self, limit: Duration) -> bool {
        let since = self.write_blocked_since_ms.load(Ordering::SeqCst);
        since != 0 && now_ms().saturating_sub(since) > limit.as_millis() as u64
    }
}

/// A socket that tells its connection when bytes move and when sending is blocked.
struct Watched {
    stream: TcpStream,
    connection: Arc<Connection>,
}

impl Watched {
    fn wrote<T>(&self, result: Poll<std::io::Result<T>>) -> Poll<std::io::Result<T>> {
        match &result {
            Poll::Ready(Ok(_)) => {
                self.connection.write_blocked_since_ms.store(0, Ordering::SeqCst);
                self.connection.last_active_ms.store(now_ms(), Ordering::SeqCst);
            }
            Poll::Pending => {
                let _ = self.connection.write_blocked_since_ms.compare_exchange(
                    0,
                    now_ms(),
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                );
            }
            Poll::Ready(Err(_)) => {}
        }
        result
    }
}

impl AsyncRead for Watched {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.stream).poll_read(cx, buf);
        if matches!(result, Poll::Ready(Ok(()))) && !buf.filled().is_empty() {
            this.connection.last_active_ms.store(now_ms(), Ordering::SeqCst);
        }
        result
    }
}

impl AsyncWrite for Watched {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.stream).poll_write(cx, data);
        this.wrote(result)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.stream).poll_write_vectored(cx, data);
        this.wrote(result)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
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
        let connection = Arc::new(Connection::new());
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

    /// Closes the idle connection that has been quiet longest; false if every one is busy.
    fn evict_one_idle(&self) -> bool {
        let mut open = self.by_age.lock().expect("not poisoned");
        let idle = open
            .1
            .iter()
            .filter(|(_, c)| c.is_idle())
            .min_by_key(|(_, c)| c.last_active_ms.load(Ordering::SeqCst))
            .map(|(&id, _)| id);
        match idle.and_then(|id| open.1.remove(&id)) {
            Some(connection) => {
                connection.evicted.notify_one();
                true
            }
            None => false,
        }
    }
}

/// What a connection past the cap is told before it is closed.
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
    let refusing = Arc::new(AtomicUsize::new(0));
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
            if refusing.load(Ordering::SeqCst) < MAX_REFUSING {
                refusing.fetch_add(1, Ordering::SeqCst);
                let refusing = refusing.clone();
                tokio::spawn(async move {
                    refuse(stream).await;
                    refusing.fetch_sub(1, Ordering::SeqCst);
                });
            }
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

/// Refused connections answered at once; past them a connection is closed unanswered.
const MAX_REFUSING: usize = 64;

/// Tells a connection past the cap that the server is busy. Its request is read and dropped for a
/// moment after the answer, since closing a socket with unread data resets it and the client
/// would see the reset instead of the answer.
async fn refuse(stream: TcpStream) {
    let Ok(stream) = stream.into_std() else { return };
    let _ = std::io::Write::write_all(&mut &stream, BUSY);
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let Ok(stream) = TcpStream::from_std(stream) else { return };
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let mut sink = [0u8; 4096];
        loop {
            if stream.readable().await.is_err() {
                return;
            }
            match stream.try_read(&mut sink) {
                Ok(0) => return,
                Err(e) if e.kind() != std::io::ErrorKind::WouldBlock => return,
                _ => {}
            }
        }
    })
    .await;
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
    let watched = Watched { stream, connection: connection.clone() };
    let mut served = pin!(builder.serve_connection(TokioIo::new(watched), service));
    let mut stopping = pin!(stop.wait_for(|stop| *stop).fuse());
    let mut check = tokio::time::interval(Duration::from_secs(1).min(limits.write_stall));
    loop {
        tokio::select! {
            _ = served.as_mut() => break,
            () = connection.evicted.notified() => break,
            _ = &mut stopping => served.as_mut().graceful_shutdown(),
            _ = check.tick() => if connection.stalled_for(limits.write_stall) {
                break;
            },
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
    // MiniMax's cloud clients read the cloud's `base_resp`, so its route answers in that shape.
    let cloud = parts.uri.path() == super::api::MUSIC_GENERATION;
    let error = |status: StatusCode, error: String| {
        if cloud {
            super::api::minimax::unreadable_body(status, &error)
        } else {
            (status, Json(ErrorBody { error })).into_response()
        }
    };
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
        let (_, c) = open.add();
        let _busy = InService::new(a.clone());
        // `c` is quiet longest; `b` has bytes it cannot send.
        b.write_blocked_since_ms.store(now_ms(), Ordering::SeqCst);
        c.last_active_ms.store(0, Ordering::SeqCst);
        assert!(open.evict_one_idle());
        assert_eq!(open.count(), 2);
        assert!(!open.by_age.lock().unwrap().1.values().any(|k| Arc::ptr_eq(k, &c)));
        // `a` is in service and `b` still sending: nothing idle is left.
        assert!(!open.evict_one_idle());
        b.write_blocked_since_ms.store(0, Ordering::SeqCst);
        assert!(open.evict_one_idle());
        open.remove(first);
        assert_eq!(open.count(), 0);
    }
}
