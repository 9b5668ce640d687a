//! A state-of-the-world ADS server for the tests, on 127.0.0.1: it serves
//! the snapshot it was last given (`RateLimitConfig` resources) to every
//! stream, once the stream's first request came and again at each change,
//! and records every request with its stream's headers. It runs on a
//! runtime of its own, so `stop` ends it as a dying process would: the
//! listener and every connection closed at once.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_server::{
    AggregatedDiscoveryService, AggregatedDiscoveryServiceServer,
};
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use envoy_types::pb::google::protobuf::Any;
use futures_util::stream::BoxStream;
use prost::Message;
use rls::xds::pb::{RateLimitConfig, TYPE_URL};
use tonic::{Request, Response, Status, Streaming};

/// One request the server received.
#[derive(Clone, Debug)]
pub struct Seen {
    /// The stream's number (0 for the first stream the server took).
    pub stream: u64,
    pub headers: Vec<(String, String)>,
    pub req: DiscoveryRequest,
}

#[derive(Clone, Debug)]
pub struct Sent {
    pub version: String,
    pub nonce: String,
}

struct Shared {
    snapshot: tokio::sync::watch::Sender<Option<(String, Vec<Any>)>>,
    seen: Mutex<Vec<Seen>>,
    sent: Mutex<Vec<Sent>>,
    nonce: AtomicU64,
    streams: AtomicU64,
}

#[derive(Clone)]
struct Ads(Arc<Shared>);

fn response(shared: &Shared, snap: &(String, Vec<Any>)) -> DiscoveryResponse {
    let nonce = shared.nonce.fetch_add(1, Ordering::SeqCst).to_string();
    shared.sent.lock().unwrap().push(Sent {
        version: snap.0.clone(),
        nonce: nonce.clone(),
    });
    DiscoveryResponse {
        version_info: snap.0.clone(),
        resources: snap.1.clone(),
        type_url: TYPE_URL.into(),
        nonce,
        ..Default::default()
    }
}

#[tonic::async_trait]
impl AggregatedDiscoveryService for Ads {
    type StreamAggregatedResourcesStream = BoxStream<'static, Result<DiscoveryResponse, Status>>;
    type DeltaAggregatedResourcesStream =
        BoxStream<'static, Result<DeltaDiscoveryResponse, Status>>;

    async fn stream_aggregated_resources(
        &self,
        req: Request<Streaming<DiscoveryRequest>>,
    ) -> Result<Response<Self::StreamAggregatedResourcesStream>, Status> {
        let headers = req
            .metadata()
            .iter()
            .filter_map(|kv| match kv {
                tonic::metadata::KeyAndValueRef::Ascii(k, v) => {
                    Some((k.to_string(), v.to_str().ok()?.to_string()))
                }
                _ => None,
            })
            .collect::<Vec<_>>();
        let stream = self.0.streams.fetch_add(1, Ordering::SeqCst);
        let mut inbound = req.into_inner();
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let shared = self.0.clone();
        tokio::spawn(async move {
            let mut snap = shared.snapshot.subscribe();
            let mut subscribed = false;
            loop {
                tokio::select! {
                    m = inbound.message() => {
                        let Ok(Some(r)) = m else { break };
                        shared.seen.lock().unwrap().push(Seen {
                            stream,
                            headers: headers.clone(),
                            req: r,
                        });
                        if !subscribed {
                            subscribed = true;
                            let current = snap.borrow_and_update().clone();
                            if let Some(s) = current {
                                if tx.send(Ok(response(&shared, &s))).await.is_err() {
                                    break;
                                }
                            }
                        }
                    }
                    changed = snap.changed(), if subscribed => {
                        if changed.is_err() {
                            break;
                        }
                        let current = snap.borrow_and_update().clone();
                        if let Some(s) = current {
                            if tx.send(Ok(response(&shared, &s))).await.is_err() {
                                break;
                            }
                        }
                    }
                }
            }
        });
        let out =
            futures_util::stream::unfold(
                rx,
                |mut rx| async move { rx.recv().await.map(|m| (m, rx)) },
            );
        Ok(Response::new(Box::pin(out)))
    }

    async fn delta_aggregated_resources(
        &self,
        _req: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<Response<Self::DeltaAggregatedResourcesStream>, Status> {
        Err(Status::unimplemented("state of the world only"))
    }
}

/// The server's TLS: its certificate and key, and the CA its clients'
/// certificates must chain to (a client without one is refused).
#[derive(Clone)]
pub struct TlsFiles {
    pub cert: std::path::PathBuf,
    pub key: std::path::PathBuf,
    pub client_ca: std::path::PathBuf,
}

/// A TLS connection as tonic's server takes it.
struct TlsConn(std::pin::Pin<Box<tokio_openssl::SslStream<tokio::net::TcpStream>>>);

impl tonic::transport::server::Connected for TlsConn {
    type ConnectInfo = ();
    fn connect_info(&self) {}
}

impl tokio::io::AsyncRead for TlsConn {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        self.0.as_mut().poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for TlsConn {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.0.as_mut().poll_write(cx, buf)
    }
    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        self.0.as_mut().poll_flush(cx)
    }
    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        self.0.as_mut().poll_shutdown(cx)
    }
}

pub(crate) fn acceptor(t: &TlsFiles) -> openssl::ssl::SslAcceptor {
    use openssl::ssl::{AlpnError, SslAcceptor, SslFiletype, SslMethod, SslVerifyMode};
    let mut b = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls()).unwrap();
    b.set_certificate_chain_file(&t.cert).unwrap();
    b.set_private_key_file(&t.key, SslFiletype::PEM).unwrap();
    b.set_ca_file(&t.client_ca).unwrap();
    b.set_verify(SslVerifyMode::PEER | SslVerifyMode::FAIL_IF_NO_PEER_CERT);
    b.set_alpn_select_callback(|_, client| {
        openssl::ssl::select_next_proto(b"\x02h2", client).ok_or(AlpnError::NOACK)
    });
    b.build()
}

pub struct XdsServer {
    pub port: u16,
    tls: Option<TlsFiles>,
    /// TLS handshakes that failed (a client refused).
    pub refused: Arc<AtomicU64>,
    shared: Arc<Shared>,
    running: Option<crate::support::Served>,
}

impl XdsServer {
    pub fn start() -> XdsServer {
        XdsServer::start_with(None)
    }

    pub fn start_with(tls: Option<TlsFiles>) -> XdsServer {
        let (snapshot, _) = tokio::sync::watch::channel(None);
        let mut s = XdsServer {
            port: crate::support::free_port(),
            tls,
            refused: Arc::new(AtomicU64::new(0)),
            shared: Arc::new(Shared {
                snapshot,
                seen: Mutex::new(Vec::new()),
                sent: Mutex::new(Vec::new()),
                nonce: AtomicU64::new(1),
                streams: AtomicU64::new(0),
            }),
            running: None,
        };
        s.serve();
        s
    }

    fn serve(&mut self) {
        let (port, ads) = (self.port, Ads(self.shared.clone()));
        let (tls, refused) = (self.tls.clone(), self.refused.clone());
        let served = crate::support::Served::start(
            "the xDS test server",
            port,
            move |listener| async move {
                let router = tonic::transport::Server::builder()
                    .add_service(AggregatedDiscoveryServiceServer::new(ads));
                match tls {
                    None => {
                        let incoming = futures_util::stream::unfold(listener, |l| async move {
                            let r = l.accept().await.map(|(s, _)| s);
                            Some((r, l))
                        });
                        router.serve_with_incoming(incoming).await.unwrap();
                    }
                    Some(t) => {
                        let acceptor = acceptor(&t);
                        let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<TlsConn>>(16);
                        tokio::spawn(async move {
                            loop {
                                let Ok((tcp, _)) = listener.accept().await else {
                                    break;
                                };
                                let (tx, ssl) = (
                                    tx.clone(),
                                    openssl::ssl::Ssl::new(acceptor.context()).unwrap(),
                                );
                                let refused = refused.clone();
                                tokio::spawn(async move {
                                    let mut s =
                                        Box::pin(tokio_openssl::SslStream::new(ssl, tcp).unwrap());
                                    if s.as_mut().accept().await.is_ok() {
                                        let _ = tx.send(Ok(TlsConn(s))).await;
                                    } else {
                                        refused.fetch_add(1, Ordering::SeqCst);
                                    }
                                });
                            }
                        });
                        let incoming = futures_util::stream::unfold(rx, |mut rx| async move {
                            rx.recv().await.map(|m| (m, rx))
                        });
                        router.serve_with_incoming(incoming).await.unwrap();
                    }
                }
            },
        );
        self.running = Some(served);
    }

    /// Ends the server: its listener and every stream close.
    pub fn stop(&mut self) {
        if let Some(mut served) = self.running.take() {
            served.stop();
        }
    }

    /// Starts it again on the same port, with the same snapshot and record.
    pub fn restart(&mut self) {
        self.stop();
        self.serve();
    }

    pub fn push(&self, version: &str, configs: &[RateLimitConfig]) {
        let any = configs
            .iter()
            .map(|c| Any {
                type_url: TYPE_URL.into(),
                value: c.encode_to_vec(),
            })
            .collect();
        self.push_any(version, any);
    }

    pub fn push_any(&self, version: &str, resources: Vec<Any>) {
        self.shared
            .snapshot
            .send_replace(Some((version.to_string(), resources)));
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.shared.seen.lock().unwrap().clone()
    }

    pub fn sent(&self) -> Vec<Sent> {
        self.shared.sent.lock().unwrap().clone()
    }

    /// The first request (in order received) that `f` accepts, waiting for
    /// it at most 15 s.
    pub fn wait_for(&self, what: &str, f: impl Fn(&Seen) -> bool) -> Seen {
        let start = Instant::now();
        loop {
            if let Some(s) = self.seen().into_iter().find(|s| f(s)) {
                return s;
            }
            assert!(
                start.elapsed() < Duration::from_secs(15),
                "timed out waiting for {what}; requests: {:#?}",
                self.seen()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for XdsServer {
    fn drop(&mut self) {
        self.stop();
    }
}
