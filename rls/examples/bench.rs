//! Benchmark (not a test): ShouldRateLimit through gRPC, redis-cell-rls
//! against its floor (examples/floor.rs: the same Redis pipeline behind
//! the same tonic, nothing else), 1 and 3 descriptors, in rounds that
//! alternate the two. Requests per second, the service's over the floor's
//! (per pair of rounds, the median), the CPU time each process spent
//! per decision (utime + stime of /proc/PID/stat over a round, divided by
//! the decisions made in it), and what each process asked of the kernel
//! per decision: its read and write calls (syscr + syscw of
//! /proc/PID/io; epoll and futex calls are not among them) and the times
//! its threads were switched out (voluntary and involuntary context
//! switches of /proc/PID/task/*/status), which tell where CPU time goes
//! outside the instructions that callgrind counts.
//! Usage: bench <seconds per round> <concurrency> <rounds> <mode: reference|all>
//!   <TLS: off | CA file> <service gRPC port> <service pid> <floor gRPC port> <floor pid>
//! or, to count instructions under callgrind: bench calls <gRPC port> <descriptors> <calls>
//!   (that many calls, one after the other on one plaintext connection).

use std::ops::AsyncFnMut;
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::{
    rate_limit_descriptor, RateLimitDescriptor,
};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use hyper_util::rt::TokioIo;
use openssl::ssl::{SslConnector, SslMethod};
use tokio::task::JoinHandle;
use tonic::transport::{Channel, Endpoint, Uri};

/// One process under load: where to call it, which process to read.
struct Target {
    port: u16,
    pid: u32,
}

struct Round {
    rps: f64,
    p50: Duration,
    p99: Duration,
    /// What the target spent per decision.
    per: Usage,
}

/// What a process has spent so far (or, divided, per decision).
#[derive(Clone, Copy, Default)]
struct Usage {
    /// utime + stime, in seconds.
    cpu: f64,
    /// Read and write system calls (syscr + syscw).
    rw: f64,
    /// Context switches of all its threads.
    switches: f64,
}

/// A field of a `/proc` file of `name: value` lines.
fn proc_field(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

fn usage(pid: u32) -> Usage {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the target's stat");
    // The fields after the command's closing parenthesis, from state (3rd).
    let rest = &stat[stat.rfind(')').expect("a stat line") + 2..];
    let f: Vec<u64> = rest
        .split(' ')
        .skip(11)
        .take(2)
        .map(|x| x.parse().unwrap())
        .collect();
    // SAFETY: sysconf reads a constant of the system; no memory is passed.
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).expect("the target's io");
    let mut switches = 0.0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).expect("the target's threads") {
        // A thread that ended meanwhile is left out.
        let Ok(status) = std::fs::read_to_string(task.unwrap().path().join("status")) else {
            continue;
        };
        switches += proc_field(&status, "voluntary_ctxt_switches")
            + proc_field(&status, "nonvoluntary_ctxt_switches");
    }
    Usage {
        cpu: (f[0] + f[1]) as f64 / tick,
        rw: proc_field(&io, "syscr") + proc_field(&io, "syscw"),
        switches,
    }
}

fn summarize(mut lat: Vec<Duration>, secs: f64, before: Usage, after: Usage) -> Round {
    let n = lat.len().max(1) as f64;
    lat.sort();
    let pick = |q: f64| {
        lat.get(((lat.len() as f64 * q) as usize).min(lat.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default()
    };
    Round {
        rps: lat.len() as f64 / secs,
        p50: pick(0.5),
        p99: pick(0.99),
        per: Usage {
            cpu: (after.cpu - before.cpu) / n,
            rw: (after.rw - before.rw) / n,
            switches: (after.switches - before.switches) / n,
        },
    }
}

/// Makes calls one after the other for `secs`: how long each took.
async fn latencies(secs: f64, mut call: impl AsyncFnMut()) -> Vec<Duration> {
    let mut lat = Vec::new();
    let end = Instant::now() + Duration::from_secs_f64(secs);
    while Instant::now() < end {
        let s = Instant::now();
        call().await;
        lat.push(s.elapsed());
    }
    lat
}

/// A channel to `port`, over TLS verified against `ca` when given (the
/// service's certificate names localhost), as Envoy connects.
async fn channel(port: u16, ca: Option<&str>) -> Channel {
    let Some(ca) = ca else {
        return Endpoint::from_shared(format!("http://127.0.0.1:{port}"))
            .unwrap()
            .tcp_nodelay(true)
            .connect()
            .await
            .unwrap();
    };
    let mut b = SslConnector::builder(SslMethod::tls_client()).unwrap();
    b.set_ca_file(ca).unwrap();
    b.set_alpn_protos(b"\x02h2").unwrap();
    let connector = b.build();
    let connect = tower::service_fn(move |_: Uri| {
        let connector = connector.clone();
        async move {
            let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
            tcp.set_nodelay(true)?;
            let ssl = connector
                .configure()
                .and_then(|c| c.into_ssl("localhost"))
                .map_err(std::io::Error::other)?;
            let mut s = tokio_openssl::SslStream::new(ssl, tcp).map_err(std::io::Error::other)?;
            std::pin::Pin::new(&mut s)
                .connect()
                .await
                .map_err(std::io::Error::other)?;
            Ok::<_, std::io::Error>(TokioIo::new(s))
        }
    });
    Endpoint::from_shared(format!("http://localhost:{port}"))
        .unwrap()
        .connect_with_connector(connect)
        .await
        .unwrap()
}

/// A request of `n` descriptors (`a`, `b`, `c`) of one user.
fn request(n: usize, user: usize) -> RateLimitRequest {
    RateLimitRequest {
        domain: "bench".into(),
        descriptors: ["a", "b", "c"][..n]
            .iter()
            .map(|k| RateLimitDescriptor {
                entries: vec![rate_limit_descriptor::Entry {
                    key: k.to_string(),
                    value: format!("u{user}"),
                }],
                ..Default::default()
            })
            .collect(),
        hits_addend: 0,
    }
}

/// `conc` clients, each on its own connection, calling for `secs` with
/// `n` descriptors of their own user.
async fn round(t: &Target, ca: Option<&str>, n: usize, secs: f64, conc: usize) -> Round {
    let mut clients = Vec::new();
    for _ in 0..conc {
        clients.push(RateLimitServiceClient::new(channel(t.port, ca).await));
    }
    let before = usage(t.pid);
    let mut tasks: Vec<JoinHandle<Vec<Duration>>> = Vec::new();
    for (user, mut c) in clients.into_iter().enumerate() {
        tasks.push(tokio::spawn(async move {
            let req = request(n, user);
            latencies(secs, async move || {
                c.should_rate_limit(req.clone()).await.unwrap();
            })
            .await
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    summarize(all, secs, before, usage(t.pid))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main]
async fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a[1] == "calls" {
        let (port, n, calls): (u16, usize, usize) = (
            a[2].parse().unwrap(),
            a[3].parse().unwrap(),
            a[4].parse().unwrap(),
        );
        let mut c = RateLimitServiceClient::new(channel(port, None).await);
        for _ in 0..calls {
            c.should_rate_limit(request(n, 0)).await.unwrap();
        }
        return;
    }
    let secs: f64 = a[1].parse().unwrap();
    let conc: usize = a[2].parse().unwrap();
    let rounds: usize = a[3].parse().unwrap();
    let mode = a[4].as_str();
    let ca = (a[5] != "off").then_some(a[5].as_str());
    let service = Target {
        port: a[6].parse().unwrap(),
        pid: a[7].parse().unwrap(),
    };
    let floor = Target {
        port: a[8].parse().unwrap(),
        pid: a[9].parse().unwrap(),
    };
    let tls = if ca.is_some() { "on" } else { "off" };
    for n in [1, 3] {
        // Warm-up of both, then pairs of rounds, in turns first, so that
        // each pair sees the same machine.
        round(&service, ca, n, 0.5, conc).await;
        round(&floor, ca, n, 0.5, conc).await;
        let (mut s, mut f) = (Vec::new(), Vec::new());
        for i in 0..rounds {
            if i % 2 == 0 {
                s.push(round(&service, ca, n, secs, conc).await);
                f.push(round(&floor, ca, n, secs, conc).await);
            } else {
                f.push(round(&floor, ca, n, secs, conc).await);
                s.push(round(&service, ca, n, secs, conc).await);
            }
        }
        let ratios: Vec<f64> = s.iter().zip(&f).map(|(s, f)| s.rps / f.rps).collect();
        let (lo, hi) = ratios
            .iter()
            .fold((f64::MAX, f64::MIN), |(l, h), r| (l.min(*r), h.max(*r)));
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let p50 = median(s.iter().map(|r| ms(r.p50)).collect());
        let p99 = median(s.iter().map(|r| ms(r.p99)).collect());
        let per = |rounds: &[Round], of: fn(&Usage) -> f64| {
            median(rounds.iter().map(|r| of(&r.per)).collect())
        };
        println!(
            "| {mode} | {tls} | {n} | {:.0} | {p50:.2} ms | {p99:.2} ms | {:.0} | {:.2} ({lo:.2}-{hi:.2}) | {:.1} | {:.1} | {:.2} / {:.2} | {:.2} / {:.2} |",
            median(s.iter().map(|r| r.rps).collect()),
            median(f.iter().map(|r| r.rps).collect()),
            median(ratios.clone()),
            per(&s, |u| u.cpu * 1e6),
            per(&f, |u| u.cpu * 1e6),
            per(&s, |u| u.rw),
            per(&f, |u| u.rw),
            per(&s, |u| u.switches),
            per(&f, |u| u.switches),
        );
    }
}
