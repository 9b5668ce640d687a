//! Tracing end to end: the service exports its spans to an OTLP receiver
//! written here (OTLP/HTTP and OTLP/gRPC), with the reference's names,
//! kinds, attributes and resource, under the caller's `traceparent`;
//! sampling rate 0 and an unsampled caller send none; a collector that
//! is down, or that never answers, fails no request.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use rls::trace::pb::{
    any_value::Value, ExportTraceServiceRequest, ExportTraceServiceResponse, Span,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tonic::codegen::{http, BoxFuture, Service};

use crate::support::*;

const CONFIG: &str = r#"
domain: traced
descriptors:
  - key: user
    rate_limit:
      unit: hour
      requests_per_unit: 100
"#;

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_ID: &str = "00f067aa0ba902b7";

/// What a receiver got: the request's path (HTTP) and headers, and the
/// export request.
#[derive(Clone)]
struct Export {
    path: String,
    headers: Vec<(String, String)>,
    req: ExportTraceServiceRequest,
}

type Got = Arc<Mutex<Vec<Export>>>;

struct Collector {
    port: u16,
    got: Got,
    task: tokio::task::JoinHandle<()>,
}

impl Collector {
    /// Where a plain (HTTP or gRPC) collector listens.
    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A span with its scope's name and its resource's attributes.
struct Seen {
    scope: String,
    resource: Vec<(String, String)>,
    span: Span,
}

impl Collector {
    fn spans(&self) -> Vec<Seen> {
        let mut out = Vec::new();
        for e in self.got.lock().unwrap().iter() {
            for rs in &e.req.resource_spans {
                let resource: Vec<(String, String)> = rs
                    .resource
                    .as_ref()
                    .map(|r| {
                        r.attributes
                            .iter()
                            .map(|kv| {
                                (
                                    kv.key.clone(),
                                    text(kv.value.as_ref().and_then(|v| v.value.as_ref())),
                                )
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                for ss in &rs.scope_spans {
                    let scope = ss
                        .scope
                        .as_ref()
                        .map(|s| s.name.clone())
                        .unwrap_or_default();
                    for span in &ss.spans {
                        out.push(Seen {
                            scope: scope.clone(),
                            resource: resource.clone(),
                            span: span.clone(),
                        });
                    }
                }
            }
        }
        out
    }

    /// Waits (bounded) until `n` spans came; fails with what came.
    async fn wait_spans(&self, n: usize) -> Vec<Seen> {
        let start = Instant::now();
        loop {
            let s = self.spans();
            if s.len() >= n {
                return s;
            }
            assert!(
                start.elapsed() < Duration::from_secs(15),
                "{} spans received, {n} expected: {:?}",
                s.len(),
                s.iter().map(|s| s.span.name.clone()).collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// OTLP/HTTP: `POST <path>` with a protobuf body, answered 200.
    async fn http() -> Collector {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let got: Got = Arc::default();
        let g = got.clone();
        let task = tokio::spawn(async move {
            while let Ok((s, _)) = l.accept().await {
                tokio::spawn(http_conn(s, g.clone()));
            }
        });
        Collector { port, got, task }
    }

    /// OTLP/gRPC: `TraceService/Export` served by tonic.
    async fn grpc() -> Collector {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let got: Got = Arc::default();
        let svc = TraceService(got.clone());
        let incoming = async_stream_of(l);
        let task = tokio::spawn(async move {
            let _ = tonic::transport::Server::builder()
                .add_service(svc)
                .serve_with_incoming(incoming)
                .await;
        });
        Collector { port, got, task }
    }

    /// OTLP/HTTP over TLS, with the certificate and key (PEM) given.
    async fn https(cert: &[u8], key: &[u8]) -> Collector {
        let id = native_tls::Identity::from_pkcs8(cert, key).expect("the collector's identity");
        let acceptor =
            tokio_native_tls::TlsAcceptor::from(native_tls::TlsAcceptor::new(id).unwrap());
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let got: Got = Arc::default();
        let g = got.clone();
        let task = tokio::spawn(async move {
            while let Ok((s, _)) = l.accept().await {
                let (acceptor, g) = (acceptor.clone(), g.clone());
                tokio::spawn(async move {
                    if let Ok(tls) = acceptor.accept(s).await {
                        http_conn(tls, g).await;
                    }
                });
            }
        });
        Collector { port, got, task }
    }

    /// Takes connections and never answers (nor reads).
    async fn black_hole() -> Collector {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((s, _)) = l.accept().await {
                held.push(s);
            }
        });
        Collector {
            port,
            got: Arc::default(),
            task,
        }
    }
}

fn async_stream_of(l: TcpListener) -> impl futures_util::Stream<Item = std::io::Result<TcpStream>> {
    futures_util::stream::unfold(l, |l| async move {
        let r = l.accept().await.map(|(s, _)| s);
        Some((r, l))
    })
}

async fn http_conn<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(mut s: S, got: Got) {
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
        let mut lines = head.split("\r\n");
        let path = lines
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .unwrap_or_default()
            .to_string();
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        let len: usize = headers
            .iter()
            .find(|(k, _)| k == "content-length")
            .and_then(|(_, v)| v.parse().ok())
            .expect("a Content-Length");
        while buf.len() < end + len {
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let body: Vec<u8> = buf.drain(..end + len).skip(end).collect();
        let req = <ExportTraceServiceRequest as prost::Message>::decode(body.as_slice())
            .expect("an ExportTraceServiceRequest");
        got.lock().unwrap().push(Export { path, headers, req });
        let ok =
            b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n";
        if s.write_all(ok).await.is_err() {
            return;
        }
    }
}

#[derive(Clone)]
struct TraceService(Got);

impl tonic::server::NamedService for TraceService {
    const NAME: &'static str = "opentelemetry.proto.collector.trace.v1.TraceService";
}

impl Service<http::Request<tonic::body::Body>> for TraceService {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        let got = self.0.clone();
        let path = req.uri().path().to_string();
        Box::pin(async move {
            assert_eq!(
                path,
                "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
            );
            let codec = tonic_prost::ProstCodec::<
                ExportTraceServiceResponse,
                ExportTraceServiceRequest,
            >::default();
            let mut grpc = tonic::server::Grpc::new(codec);
            Ok(grpc.unary(Export1(got, path), req).await)
        })
    }
}

struct Export1(Got, String);

impl tonic::server::UnaryService<ExportTraceServiceRequest> for Export1 {
    type Response = ExportTraceServiceResponse;
    type Future = BoxFuture<tonic::Response<Self::Response>, tonic::Status>;

    fn call(&mut self, r: tonic::Request<ExportTraceServiceRequest>) -> Self::Future {
        let headers = r
            .metadata()
            .iter()
            .filter_map(|kv| match kv {
                tonic::metadata::KeyAndValueRef::Ascii(k, v) => {
                    Some((k.to_string(), v.to_str().unwrap_or_default().to_string()))
                }
                _ => None,
            })
            .collect();
        self.0.lock().unwrap().push(Export {
            path: self.1.clone(),
            headers,
            req: r.into_inner(),
        });
        Box::pin(async { Ok(tonic::Response::new(ExportTraceServiceResponse::default())) })
    }
}

fn text(v: Option<&Value>) -> String {
    match v {
        Some(Value::StringValue(s)) => s.clone(),
        Some(Value::IntValue(i)) => i.to_string(),
        Some(Value::BoolValue(b)) => b.to_string(),
        Some(Value::DoubleValue(d)) => d.to_string(),
        None => "<none>".into(),
    }
}

fn attr(span: &Span, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .map(|kv| text(kv.value.as_ref().and_then(|v| v.value.as_ref())))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn named<'a>(spans: &'a [Seen], name: &str) -> &'a Seen {
    let found: Vec<&Seen> = spans.iter().filter(|s| s.span.name == name).collect();
    assert_eq!(
        found.len(),
        1,
        "one span {name}, in {:?}",
        spans.iter().map(|s| &s.span.name).collect::<Vec<_>>()
    );
    found[0]
}

fn traced_request(user: &str, traceparent: Option<&str>) -> tonic::Request<RateLimitRequest> {
    let mut r = tonic::Request::new(request("traced", vec![desc(&[("user", user)])]));
    if let Some(tp) = traceparent {
        r.metadata_mut().insert("traceparent", tp.parse().unwrap());
        r.metadata_mut()
            .insert("tracestate", "congo=t61rcWkgMzE".parse().unwrap());
    }
    r
}

/// The service on `redis` with `CONFIG`, tracing to the collector at
/// `endpoint` (over HTTP unless `more` says otherwise), its batches sent
/// every 50 ms, with the settings in `more` besides.
fn traced_rls(redis: &Redis, endpoint: &str, more: &[(&str, &str)]) -> Rls {
    let mut env = vec![
        ("TRACING_ENABLED", "true"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint),
        ("OTEL_BSP_SCHEDULE_DELAY", "50"),
    ];
    env.extend_from_slice(more);
    Rls::start(&redis.url(), &[("traced.yaml", CONFIG)], &env)
}

const GRPC_SPAN: &str = "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn otlp_http_gets_the_reference_spans_under_the_callers_traceparent() {
    let collector = Collector::http().await;
    let redis = Redis::start();
    let rls = traced_rls(
        &redis,
        &collector.url(),
        &[
            ("TRACING_SERVICE_NAME", "envoy-ratelimit"),
            ("TRACING_SERVICE_NAMESPACE", "envoy-gateway-system"),
            ("TRACING_SERVICE_INSTANCE_ID", "envoy-ratelimit-0"),
            ("TRACING_SAMPLING_RATE", "1.0"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=s3cret%21"),
            ("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test"),
        ],
    );
    let mut c = rls.client().await;
    let user = unique("u");
    // An unsampled caller: the service samples nothing of its trace.
    let unsampled = format!("00-{}-{PARENT_ID}-00", "1".repeat(32));
    let r = c
        .should_rate_limit(traced_request(&user, Some(&unsampled)))
        .await
        .unwrap();
    assert_eq!(r.into_inner().overall_code, 1);
    let tp = format!("00-{TRACE_ID}-{PARENT_ID}-01");
    let r = c
        .should_rate_limit(traced_request(&user, Some(&tp)))
        .await
        .unwrap();
    assert_eq!(r.into_inner().overall_code, 1);

    let spans = collector.wait_spans(3).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let spans_after = collector.spans();
    assert_eq!(spans_after.len(), 3, "only the sampled request's spans");
    for s in &spans {
        assert_eq!(
            hex(&s.span.trace_id),
            TRACE_ID,
            "{}: the caller's trace",
            s.span.name
        );
        assert_eq!(s.span.trace_state, "congo=t61rcWkgMzE");
        let res: std::collections::HashMap<_, _> = s.resource.iter().cloned().collect();
        assert_eq!(res["service.name"], "envoy-ratelimit");
        assert_eq!(res["service.namespace"], "envoy-gateway-system");
        assert_eq!(res["service.instance.id"], "envoy-ratelimit-0");
        assert_eq!(res["deployment.environment"], "test");
        assert!(s.span.start_time_unix_nano <= s.span.end_time_unix_nano);
        assert!(s.span.start_time_unix_nano > 1_600_000_000_000_000_000);
    }
    let server = named(&spans, GRPC_SPAN);
    assert_eq!(server.span.kind, 2, "SERVER");
    assert_eq!(hex(&server.span.parent_span_id), PARENT_ID);
    assert_eq!(server.span.flags & 0x300, 0x300, "its parent is remote");
    assert_eq!(attr(&server.span, "rpc.system").as_deref(), Some("grpc"));
    assert_eq!(
        attr(&server.span, "rpc.service").as_deref(),
        Some("envoy.service.ratelimit.v3.RateLimitService")
    );
    assert_eq!(
        attr(&server.span, "rpc.method").as_deref(),
        Some("ShouldRateLimit")
    );
    assert_eq!(
        attr(&server.span, "rpc.grpc.status_code").as_deref(),
        Some("0")
    );
    assert_eq!(
        attr(&server.span, "net.sock.peer.addr").as_deref(),
        Some("127.0.0.1")
    );
    assert!(attr(&server.span, "net.sock.peer.port").is_some());
    assert!(server.span.status.is_none());

    let exec = named(&spans, "ShouldRateLimit Execution");
    assert_eq!((exec.span.kind, exec.scope.as_str()), (1, "ratelimit"));
    assert_eq!(exec.span.parent_span_id, server.span.span_id);
    assert_eq!(attr(&exec.span, "domain").as_deref(), Some("traced"));
    assert_eq!(
        attr(&exec.span, "request string"),
        Some(format!(
            r#"domain:"traced" descriptors:{{entries:{{key:"user" value:"{user}"}}}}"#
        ))
    );
    let redis_span = named(&spans, "Redis Pipeline Execution");
    assert_eq!(
        (redis_span.span.kind, redis_span.scope.as_str()),
        (1, "redis.fixedCacheImpl")
    );
    // A sibling of the execution span, as the reference's.
    assert_eq!(redis_span.span.parent_span_id, server.span.span_id);
    assert_eq!(
        attr(&redis_span.span, "pipeline length").as_deref(),
        Some("1")
    );
    assert_eq!(
        attr(&redis_span.span, "perSecondPipeline length").as_deref(),
        Some("0")
    );
    let ids: std::collections::HashSet<_> = spans.iter().map(|s| s.span.span_id.clone()).collect();
    assert_eq!(ids.len(), 3);

    let exports = collector.got.lock().unwrap().clone();
    for e in &exports {
        assert_eq!(e.path, "/v1/traces");
        let h = |k: &str| {
            e.headers
                .iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(h("content-type").as_deref(), Some("application/x-protobuf"));
        assert_eq!(h("x-api-key").as_deref(), Some("s3cret!"));
    }

    // A failed call: its server span says so.
    let e = c
        .should_rate_limit(tonic::Request::new(request(
            "",
            vec![desc(&[("user", "x")])],
        )))
        .await
        .unwrap_err();
    assert_eq!(e.message(), "rate limit domain must not be empty");
    let spans = collector.wait_spans(5).await;
    let failed: Vec<&Seen> = spans
        .iter()
        .filter(|s| s.span.name == GRPC_SPAN && s.span.trace_id != server.span.trace_id)
        .collect();
    assert_eq!(failed.len(), 1);
    let f = &failed[0].span;
    assert!(f.parent_span_id.is_empty(), "a trace of its own");
    assert_eq!(attr(f, "rpc.grpc.status_code").as_deref(), Some("2"));
    let status = f.status.as_ref().expect("an error status");
    assert_eq!(
        (status.code, status.message.as_str()),
        (2, "rate limit domain must not be empty")
    );
    // The validation comes before Redis: no Redis span for it.
    let redis_spans = spans
        .iter()
        .filter(|s| s.span.name == "Redis Pipeline Execution")
        .count();
    assert_eq!(redis_spans, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn otlp_grpc_gets_root_spans_json_spans_and_the_spans_queued_at_shutdown() {
    let collector = Collector::grpc().await;
    let redis = Redis::start();
    let mut rls = traced_rls(
        &redis,
        &collector.url(),
        &[
            ("TRACING_EXPORTER_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer t"),
        ],
    );
    let mut c = rls.client().await;
    let user = unique("u");
    let r = c
        .should_rate_limit(traced_request(&user, None))
        .await
        .unwrap();
    assert_eq!(r.into_inner().overall_code, 1);
    let spans = collector.wait_spans(3).await;
    let server = named(&spans, GRPC_SPAN);
    assert!(
        server.span.parent_span_id.is_empty(),
        "a root: no caller's context"
    );
    assert_eq!(server.span.flags & 0x300, 0x100);
    assert_eq!(server.span.trace_id.len(), 16);
    assert_ne!(server.span.trace_id, vec![0; 16]);
    for s in &spans {
        assert_eq!(s.span.trace_id, server.span.trace_id);
        let res: std::collections::HashMap<_, _> = s.resource.iter().cloned().collect();
        // The reference's defaults: RateLimit, an empty namespace, a random UUID.
        assert_eq!(res["service.name"], "RateLimit");
        assert_eq!(res["service.namespace"], "");
        assert_eq!(res["service.instance.id"].len(), 36);
    }
    assert_eq!(
        named(&spans, "ShouldRateLimit Execution")
            .span
            .parent_span_id,
        server.span.span_id
    );
    {
        let exports = collector.got.lock().unwrap();
        let h = &exports[0].headers;
        assert!(
            h.iter()
                .any(|(k, v)| k == "authorization" && v == "Bearer t"),
            "{h:?}"
        );
    }

    // /json: as the reference's handler, each span is a trace of its own.
    let body = format!(
        r#"{{"domain":"traced","descriptors":[{{"entries":[{{"key":"user","value":"{user}"}}]}}]}}"#
    );
    let (code, _) = http_post_json(rls.http_port, &body).unwrap();
    assert_eq!(code, 200);
    let spans = collector.wait_spans(6).await;
    let json = named(&spans, "NewJsonHandler Remaining Execution");
    assert_eq!(json.scope, "ratelimit server");
    assert!(json.span.parent_span_id.is_empty());
    let response = attr(&json.span, "response").unwrap();
    assert!(
        response.starts_with("overall_code:OK statuses:{code:OK current_limit:{requests_per_unit:100 unit:HOUR} limit_remaining:98"),
        "{response}"
    );
    let traces: std::collections::HashSet<_> =
        spans.iter().map(|s| s.span.trace_id.clone()).collect();
    assert_eq!(traces.len(), 4, "one gRPC trace, three /json roots");

    // Spans still queued at SIGTERM are sent before the service exits.
    drop(c);
    let before = collector.spans().len();
    {
        let mut c = rls.client().await;
        c.should_rate_limit(traced_request(&user, None))
            .await
            .unwrap();
    }
    // SAFETY: kill(2) on our own child's pid, with a valid signal.
    unsafe { libc::kill(rls.pid() as i32, libc::SIGTERM) };
    let start = Instant::now();
    while collector.spans().len() < before + 3 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the queued spans were not sent: {}",
            rls.log_text()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    rls.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_rate_0_sends_only_what_a_sampled_caller_asks_for() {
    let collector = Collector::http().await;
    let redis = Redis::start();
    let rls = traced_rls(&redis, &collector.url(), &[("TRACING_SAMPLING_RATE", "0")]);
    let mut c = rls.client().await;
    let user = unique("u");
    for _ in 0..20 {
        c.should_rate_limit(traced_request(&user, None))
            .await
            .unwrap();
    }
    // Parent-based: a sampled caller's trace is sampled whatever the rate.
    let tp = format!("00-{TRACE_ID}-{PARENT_ID}-01");
    c.should_rate_limit(traced_request(&user, Some(&tp)))
        .await
        .unwrap();
    collector.wait_spans(3).await;
    // Spans leave in the order they end: the 20 before would be here.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let spans = collector.spans();
    assert_eq!(spans.len(), 3);
    assert!(spans.iter().all(|s| hex(&s.span.trace_id) == TRACE_ID));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_down_or_silent_fails_no_request() {
    let redis = Redis::start();
    let silent = Collector::black_hole().await;
    let down_port = free_port();
    for (protocol, endpoint) in [
        ("http", format!("http://127.0.0.1:{down_port}")),
        ("grpc", format!("http://127.0.0.1:{down_port}")),
        ("http", silent.url()),
        ("grpc", silent.url()),
    ] {
        let rls = Rls::start(
            &redis.url(),
            &[("traced.yaml", CONFIG)],
            &[
                ("TRACING_ENABLED", "true"),
                ("TRACING_EXPORTER_PROTOCOL", protocol),
                ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
                ("OTEL_EXPORTER_OTLP_TIMEOUT", "300"),
                ("OTEL_BSP_SCHEDULE_DELAY", "20"),
                // A small queue: while an export hangs, spans are dropped.
                ("OTEL_BSP_MAX_QUEUE_SIZE", "8"),
                ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "4"),
            ],
        );
        let mut c = rls.client().await;
        let user = unique("u");
        for _ in 0..60 {
            let r = c
                .should_rate_limit(traced_request(&user, None))
                .await
                .unwrap_or_else(|e| panic!("{protocol} {endpoint}: {e}"));
            assert_eq!(r.into_inner().overall_code, 1);
        }
        assert_eq!(http_get(rls.http_port, "/healthcheck").unwrap().0, 200);
        wait_until(
            "the export failure in the log",
            Duration::from_secs(10),
            || rls.log_text().contains("spans not exported to"),
        );
        if endpoint.ends_with(&format!(":{}", silent.port)) {
            // Exports that hang until their timeout: the queue fills up.
            wait_until(
                "the dropped spans in the log",
                Duration::from_secs(10),
                || {
                    rls.log_text()
                        .contains("spans dropped: the queue (OTEL_BSP_MAX_QUEUE_SIZE) was full")
                },
            );
        }
        let log = rls.log_text();
        // One line per change of failure, not one per batch.
        let lines = log
            .lines()
            .filter(|l| l.contains("level=error") && l.contains("spans not exported"))
            .count();
        assert!(lines <= 2, "{log}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn otlp_http_over_tls_to_a_collector_of_a_private_ca() {
    let d = tempdir("otlp-tls");
    crate::tls::make_ca(&d, "collector CA");
    crate::tls::issue(&d, "otel", "IP:127.0.0.1", "serverAuth");
    let read = |f: &str| std::fs::read(d.join(f)).unwrap();
    let collector = Collector::https(&read("otel.crt"), &read("otel.key")).await;
    let redis = Redis::start();
    let endpoint = format!("https://127.0.0.1:{}", collector.port);
    let ca = d.join("ca.crt").to_string_lossy().into_owned();
    // Without the collector's CA the export fails (the system's roots do
    // not know it), and the calls do not.
    let rls = traced_rls(&redis, &endpoint, &[]);
    let mut c = rls.client().await;
    let user = unique("u");
    c.should_rate_limit(traced_request(&user, None))
        .await
        .unwrap();
    wait_until(
        "the TLS failure in the log",
        Duration::from_secs(10),
        || {
            rls.log_text()
                .contains("spans not exported to https://127.0.0.1")
        },
    );
    assert!(collector.spans().is_empty());
    drop(rls);

    let rls = traced_rls(
        &redis,
        &endpoint,
        &[("OTEL_EXPORTER_OTLP_CERTIFICATE", ca.as_str())],
    );
    let mut c = rls.client().await;
    c.should_rate_limit(traced_request(&user, None))
        .await
        .unwrap();
    let spans = collector.wait_spans(3).await;
    named(&spans, GRPC_SPAN);
    assert_eq!(collector.got.lock().unwrap()[0].path, "/v1/traces");
}

/// The example's Envoy, tracing every request with its OpenTelemetry
/// tracer to `collector` (OTLP/gRPC): Envoy sends `traceparent` on the rate
/// limit call.
fn traced_envoy_config(rls_port: u16, app_port: u16, collector: u16) -> (String, u16, u16) {
    let (mut cfg, port, admin) =
        crate::envoy::on_free_ports(&crate::envoy::example_config(), rls_port, app_port);
    let tracing = r#"                stat_prefix: ingress
                tracing:
                  random_sampling: { value: 100 }
                  provider:
                    name: envoy.tracers.opentelemetry
                    typed_config:
                      "@type": type.googleapis.com/envoy.config.trace.v3.OpenTelemetryConfig
                      service_name: envoy
                      grpc_service:
                        envoy_grpc: { cluster_name: otel }
"#;
    cfg = cfg.replace("                stat_prefix: ingress\n", tracing);
    cfg.push_str(&crate::envoy::h2_cluster("otel", collector));
    (cfg, port, admin)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoys_trace_goes_on_through_the_service() {
    not_near_hour_end();
    let collector = Collector::grpc().await;
    let redis = Redis::start();
    let edge = std::fs::read_to_string(repo_root().join("rls/examples/config/edge.yaml")).unwrap();
    let endpoint = collector.url();
    let rls = Rls::start(
        &redis.url(),
        &[("edge.yaml", &edge)],
        &[
            ("TRACING_ENABLED", "true"),
            ("TRACING_EXPORTER_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_BSP_SCHEDULE_DELAY", "50"),
            // Envoy samples: its sampled flag decides, not this rate.
            ("TRACING_SAMPLING_RATE", "0"),
        ],
    );
    let app = crate::envoy::upstream();
    let (cfg, port, admin) = traced_envoy_config(rls.grpc_port, app, collector.port);
    let dir = tempdir("envoy-traced");
    let file = dir.join("envoy.yaml");
    std::fs::write(&file, cfg).unwrap();
    let log = dir.join("envoy.log");
    let mut envoy = crate::envoy::spawn_envoy(&file, &log);
    let envoy_log = || std::fs::read_to_string(&log).unwrap_or_default();
    wait_until("Envoy ready", Duration::from_secs(30), || {
        assert!(
            envoy.try_wait().ok().flatten().is_none(),
            "envoy exited: {}",
            envoy_log()
        );
        http_get(admin, "/ready")
            .map(|(c, _)| c == 200)
            .unwrap_or(false)
    });
    let user = unique("user");
    let (code, text) = http_request(
        port,
        &format!("GET /x HTTP/1.1\r\nHost: app\r\nx-user: {user}\r\nConnection: close\r\n\r\n"),
    )
    .unwrap();
    assert_eq!(code, 200, "{text}");

    // The service's three spans (Envoy's come when it flushes, every 5 s).
    let start = Instant::now();
    let (server, envoy_spans) = loop {
        let spans = collector.spans();
        let ours: Vec<&Seen> = spans.iter().filter(|s| s.span.name == GRPC_SPAN).collect();
        if let Some(server) = ours.first() {
            let envoys: Vec<Span> = spans
                .iter()
                .filter(|s| {
                    s.resource
                        .iter()
                        .any(|(k, v)| k == "service.name" && v == "envoy")
                })
                .map(|s| s.span.clone())
                .collect();
            if envoys
                .iter()
                .any(|e| e.span_id == server.span.parent_span_id)
            {
                break (server.span.clone(), envoys);
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no service span under one of Envoy's: {:?}\n{}",
            spans
                .iter()
                .map(|s| (
                    &s.span.name,
                    hex(&s.span.trace_id),
                    hex(&s.span.parent_span_id)
                ))
                .collect::<Vec<_>>(),
            envoy_log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let parent = envoy_spans
        .iter()
        .find(|e| e.span_id == server.parent_span_id)
        .unwrap();
    assert_eq!(
        server.trace_id, parent.trace_id,
        "one trace from Envoy to Redis"
    );
    assert_eq!(server.flags & 0x300, 0x300, "under a remote parent");
    let spans = collector.spans();
    for name in ["ShouldRateLimit Execution", "Redis Pipeline Execution"] {
        let s = named(&spans, name);
        assert_eq!(s.span.trace_id, server.trace_id);
        assert_eq!(s.span.parent_span_id, server.span_id);
    }
    let _ = envoy.kill();
    let _ = envoy.wait();
}
