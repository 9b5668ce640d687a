//! The benchmark's floor (not a test): the least a gRPC rate limit service
//! on redis-cell can do for rls/bench's requests. It answers
//! `ShouldRateLimit` with the one Redis pipeline redis-cell-rls sends for
//! them (checked against the service's planner at start), over a pool of
//! multiplexed connections as the service's, through the same tonic, the
//! same OpenSSL TLS and the same allocator (mimalloc), and nothing else:
//! no configuration, no matching, no stats, no task per decision.
//! rls/bench runs it beside the service.
//! Usage: floor <grpc port> <redis port> <pool size> <mode: reference|all> [<cert> <key>]

use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{SystemTime, UNIX_EPOCH};

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code, DescriptorStatus, RateLimit as PbRateLimit,
};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService, RateLimitServiceServer,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::Duration as PbDuration;
use openssl::ssl::{AlpnError, SslAcceptor, SslFiletype, SslMethod};
use redis::aio::ConnectionManager;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tonic::transport::server::Connected;
use tonic::{Request, Response, Status};

/// rls/bench's rule for every key: a billion an hour (never refused).
const LIMIT: u64 = 1_000_000_000;
const WINDOW: u64 = 3600;
const HOUR: i32 = 3;

/// The cache key the service makes for a descriptor: the reference's
/// `domain_key_value_..._windowstart`.
fn key(domain: &str, entries: &[(&str, &str)], window_start: u64) -> String {
    let mut k = String::with_capacity(64);
    k.push_str(domain);
    k.push('_');
    for (key, value) in entries {
        k.push_str(key);
        k.push('_');
        k.push_str(value);
        k.push('_');
    }
    k.push_str(&window_start.to_string());
    k
}

/// The pipeline of one request with these keys: the reference mode's
/// counting `FW.INCR` of each, or all-or-nothing's `CL.THROTTLEALL` and a
/// peek of each inside `MULTI`/`EXEC`.
fn commands(keys: &[String], all: bool) -> Vec<Vec<String>> {
    let (limit, window) = (LIMIT.to_string(), WINDOW.to_string());
    if !all {
        return keys
            .iter()
            .map(|k| {
                [
                    "FW.INCR",
                    k.as_str(),
                    limit.as_str(),
                    window.as_str(),
                    "1",
                    "ALIGN",
                    "COUNTALL",
                ]
                .map(String::from)
                .to_vec()
            })
            .collect();
    }
    let mut throttle = vec!["CL.THROTTLEALL".to_string(), keys.len().to_string()];
    throttle.extend(keys.iter().cloned());
    for _ in keys {
        throttle.extend(["FW", limit.as_str(), window.as_str(), "ALIGN"].map(String::from));
    }
    throttle.extend(["QUANTITY", "1"].map(String::from));
    let mut out = vec![throttle];
    out.extend(keys.iter().map(|k| {
        [
            "FW.PEEK",
            k.as_str(),
            limit.as_str(),
            window.as_str(),
            "ALIGN",
        ]
        .map(String::from)
        .to_vec()
    }));
    out
}

/// Panics unless the service's planner sends what the floor sends for 1
/// and 3 descriptors: the floor must do the service's Redis work.
fn check_against_the_service(all: bool) {
    use rls::config::{Config, ConfigFile, Entry};
    use rls::plan::{self, Charge, Mode};
    let text = "domain: bench\ndescriptors:\n".to_string()
        + &["a", "b", "c"]
            .map(|k| {
                format!(
                    "  - key: {k}\n    rate_limit: {{unit: hour, requests_per_unit: {LIMIT}}}\n"
                )
            })
            .concat();
    let config = Config::load(
        &[ConfigFile {
            name: "config.bench".into(),
            text,
        }],
        false,
    )
    .expect("the bench's config");
    let now = 1_700_000_000;
    for n in [1, 3] {
        let named: Vec<(&str, &str)> = ["a", "b", "c"][..n].iter().map(|k| (*k, "u1")).collect();
        let charges: Vec<Charge> = named
            .iter()
            .enumerate()
            .map(|(i, (k, v))| {
                let es = vec![Entry {
                    key: k.to_string(),
                    value: v.to_string(),
                }];
                let l = config.get_limit("bench", &es, None).expect("a rule");
                Charge {
                    index: i,
                    key: plan::cache_key("", None, "bench", &es, &l, now),
                    limit: l,
                    hits: 1,
                    negative: false,
                }
            })
            .collect();
        let mode = if all {
            Mode::AllOrNothing
        } else {
            Mode::Reference
        };
        let p = plan::plan(&charges, mode);
        let keys: Vec<String> = named
            .iter()
            .map(|e| key("bench", &[*e], (now / WINDOW) * WINDOW))
            .collect();
        assert_eq!(p.commands, commands(&keys, all), "{n} descriptors");
        assert_eq!(p.atomic, all);
    }
}

struct Floor {
    conns: Vec<ConnectionManager>,
    next: AtomicUsize,
    all: bool,
}

#[tonic::async_trait]
impl RateLimitService for Floor {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        let req = request.into_inner();
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let start = (now / WINDOW) * WINDOW;
        let keys: Vec<String> = req
            .descriptors
            .iter()
            .map(|d| {
                let es: Vec<(&str, &str)> = d
                    .entries
                    .iter()
                    .map(|e| (e.key.as_str(), e.value.as_str()))
                    .collect();
                key(&req.domain, &es, start)
            })
            .collect();
        let mut p = redis::pipe();
        if self.all {
            p.atomic();
        }
        for c in commands(&keys, self.all) {
            let mut cmd = redis::cmd(&c[0]);
            for a in &c[1..] {
                cmd.arg(a);
            }
            p.add_command(cmd);
        }
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.conns.len();
        let mut conn = self.conns[i].clone();
        let replies: Vec<Vec<i64>> = p
            .query_async(&mut conn)
            .await
            .map_err(|e| Status::unknown(format!("redis error: {e}")))?;
        // Each descriptor's reply: its FW.INCR, or its peek after the
        // CL.THROTTLEALL.
        let per_key = &replies[replies.len() - keys.len()..];
        let statuses = per_key
            .iter()
            .map(|r| DescriptorStatus {
                code: if r.first() == Some(&0) {
                    Code::Ok as i32
                } else {
                    Code::OverLimit as i32
                },
                current_limit: Some(PbRateLimit {
                    name: String::new(),
                    requests_per_unit: LIMIT as u32,
                    unit: HOUR,
                }),
                limit_remaining: r.get(2).copied().unwrap_or(0).max(0) as u32,
                duration_until_reset: Some(PbDuration {
                    seconds: (start + WINDOW - now) as i64,
                    nanos: 0,
                }),
                ..Default::default()
            })
            .collect::<Vec<_>>();
        let over = statuses.iter().any(|s| s.code == Code::OverLimit as i32);
        Ok(Response::new(RateLimitResponse {
            overall_code: if over { Code::OverLimit } else { Code::Ok } as i32,
            statuses,
            ..Default::default()
        }))
    }
}

/// A connection as tonic takes it: plaintext or OpenSSL's TLS, as the
/// service's listener accepts them.
enum Io {
    Plain(TcpStream),
    Tls(Pin<Box<tokio_openssl::SslStream<TcpStream>>>),
}

impl Connected for Io {
    type ConnectInfo = ();
    fn connect_info(&self) {}
}

impl AsyncRead for Io {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Io::Tls(s) => s.as_mut().poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Io {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Io::Tls(s) => s.as_mut().poll_write(cx, buf),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_flush(cx),
            Io::Tls(s) => s.as_mut().poll_flush(cx),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Io::Tls(s) => s.as_mut().poll_shutdown(cx),
        }
    }
}

fn acceptor(cert: &str, key: &str) -> SslAcceptor {
    let mut b = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls_server()).unwrap();
    b.set_certificate_chain_file(cert).unwrap();
    b.set_private_key_file(key, SslFiletype::PEM).unwrap();
    b.set_alpn_select_callback(|_, offered| {
        openssl::ssl::select_next_proto(b"\x02h2", offered).ok_or(AlpnError::NOACK)
    });
    b.build()
}

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() {
    let a: Vec<String> = std::env::args().collect();
    let (port, redis_port): (u16, u16) = (a[1].parse().unwrap(), a[2].parse().unwrap());
    let pool: usize = a[3].parse().unwrap();
    let all = a[4] == "all";
    check_against_the_service(all);
    let tls = (a.len() > 6).then(|| Arc::new(acceptor(&a[5], &a[6])));
    let client = redis::Client::open(format!("redis://127.0.0.1:{redis_port}")).unwrap();
    let mut conns = Vec::new();
    for _ in 0..pool.max(1) {
        conns.push(ConnectionManager::new(client.clone()).await.unwrap());
    }
    let floor = Floor {
        conns,
        next: AtomicUsize::new(0),
        all,
    };
    let listener = TcpListener::bind(("127.0.0.1", port)).await.unwrap();
    let (tx, rx) = tokio::sync::mpsc::channel::<Io>(64);
    tokio::spawn(async move {
        loop {
            let Ok((s, _)) = listener.accept().await else {
                continue;
            };
            let _ = s.set_nodelay(true);
            match &tls {
                None => {
                    let _ = tx.send(Io::Plain(s)).await;
                }
                Some(acceptor) => {
                    let (tx, acceptor) = (tx.clone(), acceptor.clone());
                    tokio::spawn(async move {
                        let Ok(ssl) = openssl::ssl::Ssl::new(acceptor.context()) else {
                            return;
                        };
                        let Ok(s) = tokio_openssl::SslStream::new(ssl, s) else {
                            return;
                        };
                        let mut s = Box::pin(s);
                        if s.as_mut().accept().await.is_ok() {
                            let _ = tx.send(Io::Tls(s)).await;
                        }
                    });
                }
            }
        }
    });
    let incoming = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|c| (Ok::<_, std::io::Error>(c), rx))
    });
    tonic::transport::Server::builder()
        .add_service(RateLimitServiceServer::new(floor))
        .serve_with_incoming(incoming)
        .await
        .unwrap();
}
