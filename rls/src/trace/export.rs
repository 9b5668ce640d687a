//! Sends finished spans to the collector, off the request path: one task
//! takes them from the bounded queue, batches them (`OTEL_BSP_*`, as the
//! Go SDK's batch span processor), and sends each batch once, within the
//! export timeout: OTLP/HTTP (`POST /v1/traces`, protobuf body, through
//! hyper) or OTLP/gRPC (`TraceService/Export`, through tonic), TLS through
//! OpenSSL (`native-tls`) unless the endpoint is plaintext. A batch the
//! collector does not take is dropped and logged (once until exports work
//! again); nothing here can stop or slow a decision.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use prost::Message;
use tokio::sync::{mpsc, oneshot};
use tonic::transport::{Channel, Endpoint, Uri};

use super::settings::{BatchSettings, ExporterSettings, Protocol, TraceSettings};
use super::{pb, Finished, Scope};
use crate::log;

/// The semantic conventions of the reference's resource (semconv v1.7.0).
const SCHEMA_URL: &str = "https://opentelemetry.io/schemas/1.7.0";
const EXPORT_PATH: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";
const USER_AGENT: &str = concat!(
    "redis-cell-rls/",
    env!("CARGO_PKG_VERSION"),
    " OTLP exporter"
);

pub struct Exporter {
    resource: pb::Resource,
    transport: Transport,
    timeout: Duration,
    target: String,
    /// The last failure logged (logged again only when it changes).
    failing: Option<String>,
    dropped_logged: u64,
}

enum Transport {
    Http(HttpLink),
    Grpc(GrpcLink),
}

/// The resource of every span: the reference's three attributes over
/// `OTEL_RESOURCE_ATTRIBUTES` (as Go's `WithResource` merges them).
pub fn resource(s: &TraceSettings, instance: &str) -> pb::Resource {
    let own = [
        ("service.name", s.service_name.as_str()),
        ("service.namespace", s.service_namespace.as_str()),
        ("service.instance.id", instance),
    ];
    let mut attributes: Vec<pb::KeyValue> = s
        .resource_attributes
        .iter()
        .filter(|(k, _)| !own.iter().any(|(o, _)| o == k))
        .map(|(k, v)| pb::KeyValue::string(k, v.clone()))
        .collect();
    attributes.extend(own.iter().map(|(k, v)| pb::KeyValue::string(k, *v)));
    pb::Resource { attributes }
}

/// One export request: the spans grouped by scope, in the order they came.
pub fn request(resource: &pb::Resource, spans: Vec<Finished>) -> pb::ExportTraceServiceRequest {
    let mut scopes: Vec<(Scope, Vec<pb::Span>)> = Vec::new();
    for f in spans {
        match scopes.iter_mut().find(|(s, _)| *s == f.scope) {
            Some((_, v)) => v.push(f.span),
            None => scopes.push((f.scope, vec![f.span])),
        }
    }
    let scope_spans = scopes
        .into_iter()
        .map(|(scope, spans)| pb::ScopeSpans {
            scope: Some(pb::InstrumentationScope {
                name: scope.name().to_string(),
                version: match scope {
                    Scope::Grpc => env!("CARGO_PKG_VERSION").to_string(),
                    _ => String::new(),
                },
            }),
            spans,
            schema_url: String::new(),
        })
        .collect();
    pb::ExportTraceServiceRequest {
        resource_spans: vec![pb::ResourceSpans {
            resource: Some(resource.clone()),
            scope_spans,
            schema_url: SCHEMA_URL.to_string(),
        }],
    }
}

/// TLS to the collector: its CA and this service's certificate when set
/// (a file that cannot be read is logged and left out, as Go does).
fn tls(e: &ExporterSettings, alpn: &str) -> Option<tokio_native_tls::TlsConnector> {
    if e.insecure {
        return None;
    }
    let mut b = native_tls::TlsConnector::builder();
    b.request_alpns(&[alpn]);
    if !e.ca_cert.is_empty() {
        if let Err(err) =
            crate::tls::add_roots(&mut b, "OTEL_EXPORTER_OTLP_CERTIFICATE", &e.ca_cert)
        {
            log::error(&format!("tracing: {err}"));
        }
    }
    if !e.client_cert.is_empty() {
        match crate::tls::identity(
            ("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", &e.client_cert),
            ("OTEL_EXPORTER_OTLP_CLIENT_KEY", &e.client_key),
        ) {
            Ok(id) => {
                b.identity(id);
            }
            Err(err) => log::error(&format!("tracing: {err}")),
        }
    }
    match b.build() {
        Ok(c) => Some(tokio_native_tls::TlsConnector::from(c)),
        Err(err) => {
            log::error(&format!("tracing: TLS: {err}"));
            native_tls::TlsConnector::new()
                .ok()
                .map(tokio_native_tls::TlsConnector::from)
        }
    }
}

fn authority(e: &ExporterSettings) -> String {
    if e.host.contains(':') {
        format!("[{}]:{}", e.host, e.port)
    } else {
        format!("{}:{}", e.host, e.port)
    }
}

impl Exporter {
    pub fn new(s: &TraceSettings, instance: &str) -> Exporter {
        let e = &s.exporter;
        let scheme = if e.insecure { "http" } else { "https" };
        let (transport, target) = match s.protocol {
            Protocol::Http => (
                Transport::Http(HttpLink {
                    authority: authority(e),
                    host: e.host.clone(),
                    port: e.port,
                    path: e.path.clone(),
                    headers: e.headers.clone(),
                    tls: tls(e, "http/1.1"),
                    insecure: e.insecure,
                    conn: None,
                }),
                format!("{scheme}://{}{}", authority(e), e.path),
            ),
            Protocol::Grpc => (
                Transport::Grpc(GrpcLink::new(e)),
                format!("{scheme}://{}", authority(e)),
            ),
        };
        Exporter {
            resource: resource(s, instance),
            transport,
            timeout: e.timeout.min(s.batch.export_timeout),
            target,
            failing: None,
            dropped_logged: 0,
        }
    }

    pub fn target(&self) -> &str {
        &self.target
    }

    /// Takes spans from the queue until the service stops: a batch goes
    /// when it is full, when the oldest span has waited `schedule_delay`,
    /// and when a flush is asked for.
    pub async fn run(
        mut self,
        mut rx: mpsc::Receiver<Finished>,
        mut flush: mpsc::Receiver<oneshot::Sender<()>>,
        batch: BatchSettings,
    ) {
        let mut buf: Vec<Finished> = Vec::with_capacity(batch.max_batch);
        let mut tick = tokio::time::interval(batch.schedule_delay);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                got = rx.recv() => match got {
                    Some(f) => {
                        buf.push(f);
                        if buf.len() >= batch.max_batch {
                            self.export(&mut buf).await;
                        }
                    }
                    None => break,
                },
                _ = tick.tick() => {
                    if !buf.is_empty() {
                        self.export(&mut buf).await;
                    }
                }
                Some(done) = flush.recv() => {
                    while let Ok(f) = rx.try_recv() {
                        buf.push(f);
                        if buf.len() >= batch.max_batch {
                            self.export(&mut buf).await;
                        }
                    }
                    if !buf.is_empty() {
                        self.export(&mut buf).await;
                    }
                    let _ = done.send(());
                }
            }
        }
    }

    async fn export(&mut self, buf: &mut Vec<Finished>) {
        let n = buf.len();
        let req = request(&self.resource, std::mem::take(buf));
        let sent = match tokio::time::timeout(self.timeout, self.send(req)).await {
            Ok(r) => r,
            Err(_) => Err(format!("no answer within {:?}", self.timeout)),
        };
        match sent {
            Ok(None) => {
                if self.failing.take().is_some() {
                    log::warn(&format!(
                        "tracing: the collector at {} takes spans again",
                        self.target
                    ));
                }
            }
            Ok(Some(partial)) => log::warn(&format!(
                "tracing: the collector at {}: {partial}",
                self.target
            )),
            Err(e) => {
                let text = format!("tracing: {n} spans not exported to {}: {e}", self.target);
                if self.failing.as_deref() != Some(e.as_str()) {
                    log::error(&text);
                } else {
                    log::debug(&text);
                }
                self.failing = Some(e);
            }
        }
        if let Some(t) = super::TRACER.get() {
            let dropped = t.dropped.load(std::sync::atomic::Ordering::Relaxed);
            if dropped > self.dropped_logged {
                log::warn(&format!(
                    "tracing: {} spans dropped: the queue (OTEL_BSP_MAX_QUEUE_SIZE) was full",
                    dropped - self.dropped_logged
                ));
                self.dropped_logged = dropped;
            }
        }
    }

    /// Sends one request; `Some` says what the collector refused of it.
    async fn send(&mut self, req: pb::ExportTraceServiceRequest) -> Result<Option<String>, String> {
        let resp = match &mut self.transport {
            Transport::Http(h) => h.send(req.encode_to_vec()).await?,
            Transport::Grpc(g) => g.send(req).await?,
        };
        Ok(resp
            .partial_success
            .filter(|p| p.rejected_spans > 0 || !p.error_message.is_empty())
            .map(|p| format!("{} spans rejected: {}", p.rejected_spans, p.error_message)))
    }
}

struct HttpLink {
    authority: String,
    host: String,
    port: u16,
    path: String,
    headers: Vec<(String, String)>,
    tls: Option<tokio_native_tls::TlsConnector>,
    insecure: bool,
    /// Kept between exports (HTTP/1.1 keep-alive).
    conn: Option<hyper::client::conn::http1::SendRequest<Full<Bytes>>>,
}

impl HttpLink {
    async fn connect(
        &self,
    ) -> Result<hyper::client::conn::http1::SendRequest<Full<Bytes>>, String> {
        let tcp = tokio::net::TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let _ = tcp.set_nodelay(true);
        let handshake_err = |e: hyper::Error| format!("HTTP: {e}");
        if self.insecure {
            let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
                .await
                .map_err(handshake_err)?;
            tokio::spawn(conn);
            return Ok(send);
        }
        let tls = self.tls.as_ref().ok_or("TLS: no connector")?;
        let stream = tls
            .connect(&self.host, tcp)
            .await
            .map_err(|e| format!("TLS: {e}"))?;
        let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(handshake_err)?;
        tokio::spawn(conn);
        Ok(send)
    }

    async fn send(&mut self, body: Vec<u8>) -> Result<pb::ExportTraceServiceResponse, String> {
        let mut send = match self.conn.take() {
            Some(mut s) => match s.ready().await {
                Ok(()) => s,
                // The collector closed it since: a new one.
                Err(_) => self.connect().await?,
            },
            None => self.connect().await?,
        };
        let mut b = hyper::Request::post(self.path.as_str())
            .header(hyper::header::HOST, self.authority.as_str())
            .header(hyper::header::CONTENT_TYPE, "application/x-protobuf")
            .header(hyper::header::USER_AGENT, USER_AGENT);
        for (k, v) in &self.headers {
            b = b.header(k.as_str(), v.as_str());
        }
        let req = b
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| format!("HTTP: {e}"))?;
        let resp = send
            .send_request(req)
            .await
            .map_err(|e| format!("HTTP: {e}"))?;
        let status = resp.status();
        // A collector's answer is small; a huge one is not read whole.
        let body = Limited::new(resp.into_body(), 1 << 20)
            .collect()
            .await
            .map_err(|e| format!("HTTP: reading the answer: {e}"))?
            .to_bytes();
        self.conn = Some(send);
        if !status.is_success() {
            let text = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
            return Err(format!("HTTP {}: {}", status.as_u16(), text.trim()));
        }
        Ok(pb::ExportTraceServiceResponse::decode(body).unwrap_or_default())
    }
}

struct GrpcLink {
    client: Option<tonic::client::Grpc<Channel>>,
    headers: Vec<(String, String)>,
    error: String,
}

impl GrpcLink {
    fn new(e: &ExporterSettings) -> GrpcLink {
        let scheme = if e.insecure { "http" } else { "https" };
        let uri = format!("{scheme}://{}", authority(e));
        let endpoint = match Endpoint::from_shared(uri) {
            Ok(ep) => ep.connect_timeout(e.timeout).tcp_nodelay(true),
            Err(err) => {
                return GrpcLink {
                    client: None,
                    headers: Vec::new(),
                    error: format!("invalid endpoint: {err}"),
                }
            }
        };
        let channel = match tls(e, "h2") {
            None => endpoint.connect_lazy(),
            Some(tls) => {
                let host = e.host.clone();
                let connect = tower::service_fn(move |uri: Uri| {
                    let (tls, host) = (tls.clone(), host.clone());
                    async move {
                        let port = uri.port_u16().unwrap_or(443);
                        let tcp = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
                        tcp.set_nodelay(true)?;
                        let stream = tls
                            .connect(&host, tcp)
                            .await
                            .map_err(std::io::Error::other)?;
                        Ok::<_, std::io::Error>(TokioIo::new(stream))
                    }
                });
                endpoint.connect_with_connector_lazy(connect)
            }
        };
        GrpcLink {
            client: Some(tonic::client::Grpc::new(channel)),
            headers: e
                .headers
                .iter()
                .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
                .collect(),
            error: String::new(),
        }
    }

    async fn send(
        &mut self,
        req: pb::ExportTraceServiceRequest,
    ) -> Result<pb::ExportTraceServiceResponse, String> {
        let Some(client) = &mut self.client else {
            return Err(self.error.clone());
        };
        let mut r = tonic::Request::new(req);
        for (k, v) in &self.headers {
            if let (Ok(k), Ok(v)) = (
                k.parse::<tonic::metadata::AsciiMetadataKey>(),
                v.parse::<tonic::metadata::AsciiMetadataValue>(),
            ) {
                r.metadata_mut().insert(k, v);
            }
        }
        client.ready().await.map_err(|e| format!("gRPC: {e}"))?;
        let path = tonic::codegen::http::uri::PathAndQuery::from_static(EXPORT_PATH);
        let codec = tonic_prost::ProstCodec::<
            pb::ExportTraceServiceRequest,
            pb::ExportTraceServiceResponse,
        >::default();
        client
            .unary(r, path, codec)
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| format!("gRPC {:?}: {}", s.code(), s.message()))
    }
}
