//! REDIS_TYPE=SENTINEL: a master and a replica with the module and one
//! sentinel; after a failover the service finds the new master by itself
//! and the counts replicated before it are kept.

use std::time::Duration;

use crate::support::*;

const CONFIG: &str =
    "domain: s\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1000}\n";

/// A sentinel watching `master_port` as `m`, once it sees the replica.
fn sentinel(master_port: u16) -> testkit::Sentinel {
    let s = testkit::Sentinel::start(
        &testkit::server_binary(),
        master_port,
        "m",
        &[
            "down-after-milliseconds m 1000".into(),
            "failover-timeout m 5000".into(),
        ],
    );
    let probe = Redis::probe(s.port);
    wait_until("sentinel sees the replica", Duration::from_secs(20), || {
        probe(&["SENTINEL", "REPLICAS", "m"])
            .map(|r| r.contains("slave"))
            .unwrap_or(false)
    });
    s
}

fn master_port(sentinel_port: u16) -> Option<u16> {
    let r = Redis::probe(sentinel_port)(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "m"]).ok()?;
    r.lines().nth(4)?.trim().parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_to_the_replica() {
    not_near_hour_end();
    let master = Redis::start();
    let replica = Redis::replica_of(&master);
    wait_until("replica in sync", Duration::from_secs(20), || {
        replica
            .cmd(&["INFO", "replication"])
            .contains("master_link_status:up")
    });
    let s = sentinel(master.port);
    let rls = Rls::start(
        &format!("m,127.0.0.1:{}", s.port),
        &[("s.yaml", CONFIG)],
        &[("REDIS_TYPE", "SENTINEL")],
    );
    let mut c = rls.client().await;
    let k = unique("k");
    let window = hour();
    let key = format!("s_k_{k}_{window}");
    for _ in 0..5 {
        assert_eq!(
            call(&mut c, request("s", vec![desc(&[("k", &k)])]))
                .await
                .overall_code,
            OK
        );
    }
    wait_until("the count replicated", Duration::from_secs(10), || {
        replica.get_int(&key) == 5
    });

    Redis::probe(s.port)(&["SENTINEL", "FAILOVER", "m"]).unwrap();
    wait_until("the replica promoted", Duration::from_secs(30), || {
        master_port(s.port) == Some(replica.port)
    });
    wait_until("the replica is a master", Duration::from_secs(30), || {
        replica.cmd(&["ROLE"]).contains("master")
    });
    // Writes that reach the old master before the sentinel demotes it are
    // lost with it (Redis replication is asynchronous): wait for the demotion.
    wait_until("the old master demoted", Duration::from_secs(30), || {
        master.cmd(&["ROLE"]).contains("slave")
    });
    // The service finds the new master: the first call fails on the old one
    // (READONLY), the next asks the sentinel again.
    let mut acked = 0;
    wait_until("a call on the new master", Duration::from_secs(30), || {
        let ok = tokio::task::block_in_place(|| {
            tokio::runtime::Handle::current()
                .block_on(c.should_rate_limit(request("s", vec![desc(&[("k", &k)])])))
                .is_ok()
        });
        if ok {
            acked += 1;
        }
        acked >= 3
    });
    assert_eq!(
        replica.get_int(&key),
        5 + 3,
        "the counts before the failover are kept"
    );
}
