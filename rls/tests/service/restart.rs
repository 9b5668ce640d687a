//! Redis restarts during traffic: the service answers errors while Redis
//! is down, reconnects by itself, and no count Redis acknowledged is lost
//! (AOF with fsync always, the server killed with SIGKILL).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::support::*;

const CONFIG: &str = "domain: r\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 100000}\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_during_traffic_loses_no_acknowledged_count() {
    not_near_hour_end();
    let mut redis = Redis::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let rls = Rls::start(&redis.url(), &[("r.yaml", CONFIG)], &[]);
    let k = unique("k");
    let window = hour();
    let (acked, failed, stop) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    let mut tasks = Vec::new();
    for _ in 0..2 {
        let mut c = rls.client().await;
        let (acked, failed, stop, k) = (acked.clone(), failed.clone(), stop.clone(), k.clone());
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                match c
                    .should_rate_limit(request("r", vec![desc(&[("k", &k)])]))
                    .await
                {
                    Ok(r) => {
                        assert_eq!(r.into_inner().overall_code, OK);
                        acked.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        assert!(e.message().starts_with("redis error"), "{}", e.message());
                        failed.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            }
        }));
    }
    let wait_acked = |n: u64| {
        let acked = acked.clone();
        async move {
            let start = std::time::Instant::now();
            while acked.load(Ordering::Relaxed) < n {
                assert!(
                    start.elapsed() < Duration::from_secs(20),
                    "traffic stalled at {}",
                    acked.load(Ordering::Relaxed)
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    wait_acked(50).await;
    // Kill and restart twice while both clients keep calling.
    for _ in 0..2 {
        tokio::task::block_in_place(|| redis.restart());
        let now = acked.load(Ordering::Relaxed);
        wait_acked(now + 30).await;
    }
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    let acked = acked.load(Ordering::Relaxed);
    let failed = failed.load(Ordering::Relaxed);
    let count = redis.get_int(&format!("r_k_{k}_{window}")) as u64;
    // Every acknowledged hit is in Redis; at most the failed calls (whose
    // write may have landed before the connection broke) add to it.
    assert!(
        count >= acked,
        "lost counts: redis {count} < acknowledged {acked}"
    );
    assert!(
        count <= acked + failed,
        "redis {count} > acknowledged {acked} + failed {failed}"
    );
    assert!(
        rls.metric("ratelimit_service_should_rate_limit_error{err_type=\"redis_error\"}") == failed
    );
}
