//! What keeps idle and slow sockets from taking the service down: a cap on
//! the connections of each listener, deadlines, accept errors that back
//! off, and the `nofile` limit raised to its hard limit.
//!
//! At the cap, a new connection closes the oldest one that is idle (an HTTP
//! connection still waiting for its request; a gRPC connection that has not
//! sent the HTTP/2 preface, else the one without a request for the longest
//! time), so a flood of idle sockets cannot lock out a health check. Only
//! when every connection is busy answering is the new one closed instead.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::sync::oneshot;
use tonic::codegen::{http, Service};
use tonic::server::NamedService;
use tonic::transport::server::Connected;

use crate::log;

/// Raises the soft `nofile` limit to the hard one (containers often start
/// with 1024). Answers the soft limit before and after.
pub fn raise_nofile() -> (u64, u64) {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes only the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return (1024, 1024);
    }
    let before = r.rlim_cur;
    if r.rlim_cur < r.rlim_max {
        let mut want = r;
        want.rlim_cur = r.rlim_max;
        // SAFETY: setrlimit reads only the struct it is given.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &want) } == 0 {
            r = want;
        } else {
            // An unlimited hard limit is more than the kernel takes.
            want.rlim_cur = r.rlim_max.min(1 << 20);
            // SAFETY: as above.
            if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &want) } == 0 {
                r = want;
            }
        }
    }
    (before, r.rlim_cur)
}

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn now_ms() -> u64 {
    u64::try_from(epoch().elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// One connection as its listener's limiter sees it.
#[derive(Default)]
pub struct ConnState {
    busy: AtomicUsize,
    /// When it last became idle, in ms since `epoch()`.
    idle_since: AtomicU64,
    /// Past its handshake (the HTTP/2 preface).
    established: AtomicBool,
    /// The client's address (the gRPC server span's peer).
    pub peer: std::sync::OnceLock<std::net::SocketAddr>,
}

impl ConnState {
    /// A request starts: the connection is not idle until it ends.
    pub fn begin(self: &Arc<Self>) -> Busy {
        self.busy.fetch_add(1, Ordering::AcqRel);
        Busy(self.clone())
    }

    fn idle(&self) -> bool {
        self.busy.load(Ordering::Acquire) == 0
    }
}

/// A request in progress on a connection (see `ConnState::begin`).
pub struct Busy(Arc<ConnState>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.idle_since.store(now_ms(), Ordering::Release);
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

struct Open {
    state: Arc<ConnState>,
    close: Option<oneshot::Sender<()>>,
}

/// The connections of one listener, at most `cap`.
pub struct Limiter {
    name: &'static str,
    cap: usize,
    open: Mutex<(u64, HashMap<u64, Open>)>,
}

/// A connection's place under its listener's cap, given back when dropped.
pub struct Slot {
    limiter: Arc<Limiter>,
    id: u64,
    pub state: Arc<ConnState>,
    /// Resolves when the limiter closes this connection for a newer one.
    pub evicted: oneshot::Receiver<()>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut g = self.limiter.open.lock().unwrap_or_else(|e| e.into_inner());
        g.1.remove(&self.id);
    }
}

impl Limiter {
    pub fn new(name: &'static str, cap: usize) -> Arc<Limiter> {
        Arc::new(Limiter {
            name,
            cap: cap.max(1),
            open: Mutex::new((0, HashMap::new())),
        })
    }

    /// The connections open now.
    pub fn open(&self) -> usize {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).1.len()
    }

    /// A slot for a new connection: at the cap, the oldest idle one is
    /// closed for it; none when every connection is busy.
    pub fn admit(self: &Arc<Self>) -> Option<Slot> {
        let mut g = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if g.1.len() >= self.cap {
            let victim =
                g.1.iter()
                    .filter(|(_, o)| o.state.idle())
                    .min_by_key(|(_, o)| {
                        (
                            o.state.established.load(Ordering::Acquire),
                            o.state.idle_since.load(Ordering::Acquire),
                        )
                    })
                    .map(|(id, _)| *id)?;
            if let Some(mut o) = g.1.remove(&victim) {
                if let Some(tx) = o.close.take() {
                    let _ = tx.send(());
                }
            }
        }
        let id = g.0;
        g.0 += 1;
        let state = Arc::new(ConnState {
            idle_since: AtomicU64::new(now_ms()),
            ..Default::default()
        });
        let (tx, rx) = oneshot::channel();
        g.1.insert(
            id,
            Open {
                state: state.clone(),
                close: Some(tx),
            },
        );
        Some(Slot {
            limiter: self.clone(),
            id,
            state,
            evicted: rx,
        })
    }
}

/// A listener whose connections `accept_loop` takes: TCP, or a Unix
/// domain socket (`GRPC_UDS`).
pub trait Accept: Send + 'static {
    type Conn: Send + 'static;
    /// A connection, and its peer's address where it has one (TCP).
    fn accept_conn(
        &self,
    ) -> impl Future<Output = io::Result<(Self::Conn, Option<std::net::SocketAddr>)>> + Send;
}

impl Accept for TcpListener {
    type Conn = TcpStream;
    async fn accept_conn(&self) -> io::Result<(TcpStream, Option<std::net::SocketAddr>)> {
        let (s, peer) = self.accept().await?;
        let _ = s.set_nodelay(true);
        Ok((s, Some(peer)))
    }
}

impl Accept for UnixListener {
    type Conn = UnixStream;
    async fn accept_conn(&self) -> io::Result<(UnixStream, Option<std::net::SocketAddr>)> {
        Ok((self.accept().await?.0, None))
    }
}

/// Accepts connections for as long as the listener lives, each with a slot
/// under `limiter`'s cap. An accept error (out of descriptors, say) stays
/// until something closes: wait, longer each time, instead of spinning.
pub async fn accept_loop<L: Accept>(
    listener: L,
    limiter: Arc<Limiter>,
    mut on_conn: impl FnMut(L::Conn, Slot),
) {
    const FIRST: Duration = Duration::from_millis(5);
    let mut backoff = FIRST;
    loop {
        match listener.accept_conn().await {
            Ok((s, peer)) => {
                backoff = FIRST;
                match limiter.admit() {
                    Some(slot) => {
                        if let Some(peer) = peer {
                            let _ = slot.state.peer.set(peer);
                        }
                        on_conn(s, slot)
                    }
                    // Every connection is busy: this one closes at once.
                    None => drop(s),
                }
            }
            Err(e) => {
                if backoff == FIRST {
                    log::error(&format!(
                        "{}: accepting a connection failed: {e} ({} open)",
                        limiter.name,
                        limiter.open()
                    ));
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
        }
    }
}

/// The HTTP/2 client preface's length: a connection that has sent it is
/// past its handshake.
const PREFACE_LEN: u64 = 24;

/// A gRPC connection: closed (read as end of stream) when it has not sent
/// the HTTP/2 preface within `handshake`, when it has had no request for
/// `idle`, or when its limiter closes it for a newer one.
pub struct GrpcConn {
    io: Io,
    slot: Slot,
    timer: Pin<Box<tokio::time::Sleep>>,
    received: u64,
    idle: Duration,
    closed: bool,
    /// The waker the eviction and the timer last registered (polled
    /// Pending with). A future that answered Pending wakes that waker when
    /// it is ready, so while reads come with the same one (always, on one
    /// connection's task), a read only checks whether either fired instead
    /// of polling both again.
    armed: Option<std::task::Waker>,
}

/// The gRPC listener: `GRPC_HOST:GRPC_PORT`, or the socket `GRPC_UDS`.
pub enum GrpcListener {
    Tcp(TcpListener),
    Unix(UnixListener),
}

/// An accepted gRPC socket, TCP or Unix.
pub enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

macro_rules! either {
    ($self:expr, $s:ident => $e:expr) => {
        match $self.get_mut() {
            Stream::Tcp($s) => $e,
            Stream::Unix($s) => $e,
        }
    };
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        either!(self, s => Pin::new(s).poll_read(cx, buf))
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        either!(self, s => Pin::new(s).poll_write(cx, buf))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        either!(self, s => Pin::new(s).poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        either!(self, s => Pin::new(s).poll_shutdown(cx))
    }
}

/// A gRPC connection's socket: plain, or TLS once its handshake is done.
pub enum Io {
    Plain(Stream),
    Tls(Box<tokio_openssl::SslStream<Stream>>),
}

impl AsyncRead for Io {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Io {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_flush(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// The TLS handshake of an accepted connection, on its own task so that a
/// slow or silent client holds up nobody else: given up after `handshake`
/// or when the limiter closes the connection for a newer one.
async fn tls_handshake(
    acceptor: &openssl::ssl::SslAcceptor,
    tcp: Stream,
    slot: &mut Slot,
    handshake: Duration,
) -> Option<Io> {
    let ssl = match openssl::ssl::Ssl::new(acceptor.context()) {
        Ok(ssl) => ssl,
        Err(e) => {
            log::error(&format!("grpc: TLS: {e}"));
            return None;
        }
    };
    let mut stream = tokio_openssl::SslStream::new(ssl, tcp).ok()?;
    let done = tokio::select! {
        r = tokio::time::timeout(handshake, Pin::new(&mut stream).accept()) => r,
        _ = &mut slot.evicted => return None,
    };
    match done {
        Ok(Ok(())) => Some(Io::Tls(Box::new(stream))),
        Ok(Err(e)) => {
            log::debug(&format!("grpc: TLS handshake failed: {e}"));
            None
        }
        Err(_) => {
            log::debug("grpc: TLS handshake timed out");
            None
        }
    }
}

/// What a gRPC request sees of its connection (a request extension).
#[derive(Clone)]
pub struct ConnInfo(pub Arc<ConnState>);

impl GrpcConn {
    pub fn new(io: Io, slot: Slot, handshake: Duration, idle: Duration) -> GrpcConn {
        GrpcConn {
            io,
            slot,
            timer: Box::pin(tokio::time::sleep(handshake)),
            received: 0,
            idle,
            closed: false,
            armed: None,
        }
    }

    /// When the timer fires: the next deadline, or none when the
    /// connection is to close.
    fn next_deadline(&self) -> Option<tokio::time::Instant> {
        let s = &self.slot.state;
        if !s.established.load(Ordering::Acquire) {
            return None;
        }
        let now = tokio::time::Instant::now();
        if !s.idle() {
            return Some(now + self.idle);
        }
        let since = s.idle_since.load(Ordering::Acquire);
        let idle_for = Duration::from_millis(now_ms().saturating_sub(since));
        self.idle
            .checked_sub(idle_for)
            .filter(|d| !d.is_zero())
            .map(|d| now + d)
    }
}

impl Connected for GrpcConn {
    type ConnectInfo = ConnInfo;

    fn connect_info(&self) -> ConnInfo {
        ConnInfo(self.slot.state.clone())
    }
}

impl AsyncRead for GrpcConn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.closed {
            return Poll::Ready(Ok(()));
        }
        let armed = this.armed.as_ref().is_some_and(|w| w.will_wake(cx.waker()));
        if armed {
            if !matches!(
                this.slot.evicted.try_recv(),
                Err(oneshot::error::TryRecvError::Empty)
            ) {
                this.closed = true;
                return Poll::Ready(Ok(()));
            }
        } else if Pin::new(&mut this.slot.evicted).poll(cx).is_ready() {
            this.closed = true;
            return Poll::Ready(Ok(()));
        }
        if !armed || this.timer.is_elapsed() {
            while this.timer.as_mut().poll(cx).is_ready() {
                match this.next_deadline() {
                    Some(at) => this.timer.as_mut().reset(at),
                    None => {
                        this.closed = true;
                        return Poll::Ready(Ok(()));
                    }
                }
            }
            // Both are Pending with this waker now.
            if !armed {
                this.armed = Some(cx.waker().clone());
            }
        }
        let before = buf.filled().len();
        let r = Pin::new(&mut this.io).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = r {
            let state = &this.slot.state;
            if !state.established.load(Ordering::Acquire) {
                this.received = this
                    .received
                    .saturating_add((buf.filled().len() - before) as u64);
                if this.received >= PREFACE_LEN {
                    state.idle_since.store(now_ms(), Ordering::Release);
                    state.established.store(true, Ordering::Release);
                    let at = tokio::time::Instant::now() + this.idle;
                    this.timer.as_mut().reset(at);
                    // Registered again at the next read.
                    this.armed = None;
                }
            }
        }
        r
    }
}

impl AsyncWrite for GrpcConn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

/// A gRPC service whose requests mark their connection busy while they
/// run, so that the idle deadline and the cap's choice of what to close
/// count only connections without a request. A panic while answering ends
/// that request with INTERNAL, not the connection and every stream on it.
#[derive(Clone)]
pub struct Tracked<S>(pub S);

impl<S: NamedService> NamedService for Tracked<S> {
    const NAME: &'static str = S::NAME;
}

/// A future whose panic is caught and answered as `Err(())`.
struct CatchUnwind<F>(Pin<Box<F>>);

impl<F: Future> Future for CatchUnwind<F> {
    type Output = Result<F::Output, ()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = self.0.as_mut();
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Err(_) => Poll::Ready(Err(())),
        }
    }
}

fn panicked<B: Default>(path: &str) -> http::Response<B> {
    log::error(&format!("{path}: the handler panicked; answered INTERNAL"));
    tonic::Status::internal("the service failed on this request").into_http()
}

impl<S, B, RB> Service<http::Request<B>> for Tracked<S>
where
    S: Service<http::Request<B>, Response = http::Response<RB>>,
    S::Future: Send + 'static,
    RB: Default + Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let busy = req.extensions().get::<ConnInfo>().map(|c| c.0.begin());
        let path = req.uri().path().to_string();
        let inner = &mut self.0;
        let fut = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| inner.call(req)));
        Box::pin(async move {
            let r = match fut {
                Ok(fut) => CatchUnwind(Box::pin(fut)).await,
                Err(_) => Err(()),
            };
            drop(busy);
            r.unwrap_or_else(|()| Ok(panicked(&path)))
        })
    }
}

/// The accepted gRPC connections, as the stream `serve_with_incoming`
/// takes. TLS and the caps apply the same on TCP and on a Unix socket.
pub fn grpc_incoming(
    listener: GrpcListener,
    cap: usize,
    handshake: Duration,
    idle: Duration,
    tls: Option<crate::tls::GrpcAcceptor>,
) -> impl futures_util::Stream<Item = io::Result<GrpcConn>> {
    let (tx, rx) = tokio::sync::mpsc::channel::<GrpcConn>(64);
    let limiter = Limiter::new("grpc", cap);
    let on_conn = move |s: Stream, mut slot: Slot| {
        match &tls {
            // A full queue means the server is not taking connections: drop.
            None => {
                let _ = tx.try_send(GrpcConn::new(Io::Plain(s), slot, handshake, idle));
            }
            Some(acceptor) => {
                let (tx, acceptor) = (tx.clone(), acceptor.current());
                tokio::spawn(async move {
                    let started = tokio::time::Instant::now();
                    if let Some(io) = tls_handshake(&acceptor, s, &mut slot, handshake).await {
                        // The HTTP/2 preface gets what is left of the time.
                        let left = handshake.saturating_sub(started.elapsed());
                        let _ = tx.try_send(GrpcConn::new(io, slot, left, idle));
                    }
                });
            }
        }
    };
    match listener {
        GrpcListener::Tcp(l) => tokio::spawn(accept_loop(l, limiter, move |s, slot| {
            on_conn(Stream::Tcp(s), slot)
        })),
        GrpcListener::Unix(l) => tokio::spawn(accept_loop(l, limiter, move |s, slot| {
            on_conn(Stream::Unix(s), slot)
        })),
    };
    futures_util::stream::unfold(
        rx,
        |mut rx| async move { rx.recv().await.map(|c| (Ok(c), rx)) },
    )
}

/// Binds the Unix domain socket `path` for gRPC. A socket file left by a
/// service that is gone (nothing accepts on it) is removed first; a live
/// one, or a file that is not a socket, stops the start.
pub async fn bind_uds(path: &str) -> Result<UnixListener, String> {
    use std::os::unix::fs::FileTypeExt;
    // Through tokio's blocking pool: a path on a stalled disk must not
    // hold a runtime thread (the xDS client and health tasks run already).
    if let Ok(meta) = tokio::fs::symlink_metadata(path).await {
        if !meta.file_type().is_socket() {
            return Err(format!(
                "GRPC_UDS: {path} exists and is not a socket (it is left as it is)"
            ));
        }
        match UnixStream::connect(path).await {
            Ok(_) => {
                return Err(format!(
                    "GRPC_UDS: {path}: a server already listens on this socket"
                ))
            }
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                log::info(&format!("GRPC_UDS: removing the stale socket {path}"));
                tokio::fs::remove_file(path)
                    .await
                    .map_err(|e| format!("GRPC_UDS: cannot remove the stale socket {path}: {e}"))?;
            }
            Err(e) => return Err(format!("GRPC_UDS: {path}: {e}")),
        }
    }
    UnixListener::bind(path).map_err(|e| format!("GRPC_UDS: cannot listen on {path}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_the_cap_the_oldest_idle_connection_closes() {
        let l = Limiter::new("t", 2);
        let mut a = l.admit().unwrap();
        let b = l.admit().unwrap();
        let busy = b.state.begin();
        let mut c = l.admit().unwrap();
        assert!(a.evicted.try_recv().is_ok(), "a was idle and the oldest");
        assert_eq!(l.open(), 2);
        let _c_busy = c.state.begin();
        assert!(l.admit().is_none(), "every connection busy: refused");
        drop(busy);
        let _d = l.admit().unwrap();
        assert!(c.evicted.try_recv().is_err());
        drop(a);
        assert_eq!(l.open(), 2);
    }

    #[test]
    fn nofile_is_raised_to_the_hard_limit() {
        let (_, after) = raise_nofile();
        let mut r = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes only the struct it is given.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) }, 0);
        assert_eq!(r.rlim_cur, after);
        assert!(r.rlim_cur == r.rlim_max || r.rlim_cur == 1 << 20);
    }

    #[derive(Clone)]
    struct Panics;

    impl Service<http::Request<()>> for Panics {
        type Response = http::Response<tonic::body::Body>;
        type Error = std::convert::Infallible;
        type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, req: http::Request<()>) -> Self::Future {
            let now = req.uri().path() == "/now";
            if now {
                panic!("in call");
            }
            Box::pin(async move {
                tokio::task::yield_now().await;
                panic!("in the future");
            })
        }
    }

    #[tokio::test]
    async fn a_panic_answers_internal_and_leaves_the_connection_idle() {
        let state = Arc::new(ConnState::default());
        for path in ["/now", "/later"] {
            let mut req = http::Request::builder().uri(path).body(()).unwrap();
            req.extensions_mut().insert(ConnInfo(state.clone()));
            let resp = Tracked(Panics).call(req).await.unwrap();
            assert_eq!(
                resp.headers().get("grpc-status").map(|v| v.as_bytes()),
                Some(&b"13"[..]),
                "{path}"
            );
            assert!(state.idle(), "{path}");
        }
    }
}
