//! Benchmark (not a test): ShouldRateLimit through gRPC against the same
//! Redis calls made directly, 1 and 3 descriptors, in one run.
//! Usage: bench <rls grpc port> <redis port> <seconds per round> <concurrency> <mode: reference|all>

use std::ops::AsyncFnMut;
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::{
    rate_limit_descriptor, RateLimitDescriptor,
};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use rls::config::{Config, ConfigFile, Entry};
use rls::plan::{self, Charge, Mode};
use tokio::task::JoinHandle;

const CONFIG: &str = "domain: bench\ndescriptors:\n  - key: a\n    rate_limit: {unit: hour, requests_per_unit: 1000000000}\n  - key: b\n    rate_limit: {unit: hour, requests_per_unit: 1000000000}\n  - key: c\n    rate_limit: {unit: hour, requests_per_unit: 1000000000}\n";

fn entries(n: usize, user: usize) -> Vec<Vec<Entry>> {
    ["a", "b", "c"][..n]
        .iter()
        .map(|k| {
            vec![Entry {
                key: k.to_string(),
                value: format!("u{user}"),
            }]
        })
        .collect()
}

struct Round {
    rps: f64,
    p50: Duration,
    p99: Duration,
}

fn summarize(mut lat: Vec<Duration>, secs: f64) -> Round {
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

/// Every task's latencies, as one round of `secs`.
async fn gather(tasks: Vec<JoinHandle<Vec<Duration>>>, secs: f64) -> Round {
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    summarize(all, secs)
}

async fn grpc_round(port: u16, n: usize, secs: f64, conc: usize) -> Round {
    let mut tasks = Vec::new();
    for t in 0..conc {
        let mut c = RateLimitServiceClient::connect(format!("http://127.0.0.1:{port}"))
            .await
            .unwrap();
        tasks.push(tokio::spawn(async move {
            let descriptors: Vec<RateLimitDescriptor> = entries(n, t)
                .into_iter()
                .map(|es| RateLimitDescriptor {
                    entries: es
                        .into_iter()
                        .map(|e| rate_limit_descriptor::Entry {
                            key: e.key,
                            value: e.value,
                        })
                        .collect(),
                    ..Default::default()
                })
                .collect();
            latencies(secs, async move || {
                let req = RateLimitRequest {
                    domain: "bench".into(),
                    descriptors: descriptors.clone(),
                    hits_addend: 0,
                };
                c.should_rate_limit(req).await.unwrap();
            })
            .await
        }));
    }
    gather(tasks, secs).await
}

/// The same commands the service sends, built by the same planner, sent
/// straight to Redis.
async fn direct_round(redis_port: u16, n: usize, secs: f64, conc: usize, mode: Mode) -> Round {
    let config = Config::load(
        &[ConfigFile {
            name: "config.bench".into(),
            text: CONFIG.into(),
        }],
        false,
    )
    .unwrap();
    let client = redis::Client::open(format!("redis://127.0.0.1:{redis_port}")).unwrap();
    let mut tasks = Vec::new();
    for t in 0..conc {
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let config = config.clone();
        tasks.push(tokio::spawn(async move {
            latencies(secs, async move || {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_secs();
                let charges: Vec<Charge> = entries(n, t)
                    .iter()
                    .enumerate()
                    .map(|(i, es)| {
                        let l = config.get_limit("bench", es, None).unwrap();
                        Charge {
                            index: i,
                            key: plan::cache_key("", None, "bench", es, &l, now),
                            limit: l,
                            hits: 1,
                            negative: false,
                        }
                    })
                    .collect();
                let p = plan::plan(&charges, mode);
                let mut pipe = redis::pipe();
                if p.atomic {
                    pipe.atomic();
                }
                for c in &p.commands {
                    let mut cmd = redis::cmd(&c[0]);
                    for a in &c[1..] {
                        cmd.arg(a);
                    }
                    pipe.add_command(cmd);
                }
                let _: Vec<Vec<i64>> = pipe.query_async(&mut conn).await.unwrap();
            })
            .await
        }));
    }
    gather(tasks, secs).await
}

#[tokio::main]
async fn main() {
    let a: Vec<String> = std::env::args().collect();
    let (grpc, redis_port): (u16, u16) = (a[1].parse().unwrap(), a[2].parse().unwrap());
    let secs: f64 = a[3].parse().unwrap();
    let conc: usize = a[4].parse().unwrap();
    let mode = if a[5] == "all" {
        Mode::AllOrNothing
    } else {
        Mode::Reference
    };
    println!("mode {} concurrency {conc}, {secs} s per round", a[5]);
    println!("| descriptors | gRPC req/s | p50 | p99 | direct req/s | p50 | p99 | gRPC / direct |");
    println!("|---|---|---|---|---|---|---|---|");
    for n in [1, 3] {
        // Warm-up, then alternate rounds so both see the same machine.
        grpc_round(grpc, n, 0.5, conc).await;
        let (mut g, mut d) = (Vec::new(), Vec::new());
        for _ in 0..3 {
            g.push(grpc_round(grpc, n, secs, conc).await);
            d.push(direct_round(redis_port, n, secs, conc, mode).await);
        }
        let med = |v: &mut Vec<Round>| {
            v.sort_by(|x, y| x.rps.total_cmp(&y.rps));
            v.remove(v.len() / 2)
        };
        let (g, d) = (med(&mut g), med(&mut d));
        println!(
            "| {n} | {:.0} | {:.2} ms | {:.2} ms | {:.0} | {:.2} ms | {:.2} ms | {:.2} |",
            g.rps,
            g.p50.as_secs_f64() * 1e3,
            g.p99.as_secs_f64() * 1e3,
            d.rps,
            d.p50.as_secs_f64() * 1e3,
            d.p99.as_secs_f64() * 1e3,
            g.rps / d.rps
        );
    }
}
