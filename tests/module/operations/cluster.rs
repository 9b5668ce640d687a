//! A three-master Redis Cluster on loopback ports, the module loaded on
//! every node, driven by a cluster-aware client.

use crate::support::*;
use redis::cluster::ClusterClient;
use std::process::Command;

/// `$REDIS_CLI`, or `redis-cli` from the PATH (Debian's speaks to every
/// server of the matrix; most of them ship without one).
fn cli() -> String {
    std::env::var("REDIS_CLI").unwrap_or_else(|_| "redis-cli".to_string())
}

struct Cluster {
    nodes: Vec<Server>,
}

impl Cluster {
    /// Three masters on the frozen clock, formed by the test kit (which
    /// moves their clocks to `T0 + 5 s`: a new master turns its state ok
    /// only after 2 s of server time).
    fn start() -> Self {
        let spec = Options {
            config: vec![("cluster-node-timeout".into(), "5000".into())],
            ..Options::default()
        }
        .spec();
        let nodes = testkit::cluster(&spec, 3)
            .into_iter()
            .map(Server::from_kit)
            .collect();
        Cluster { nodes }
    }

    fn client(&self) -> redis::cluster::ClusterConnection {
        let urls: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("redis://127.0.0.1:{}/", n.port))
            .collect();
        ClusterClient::new(urls).unwrap().get_connection().unwrap()
    }

    /// The node that holds `key`, found by asking every node.
    fn holder(&self, key: &str) -> Vec<u16> {
        self.nodes
            .iter()
            .filter(|n| {
                let mut c = n.conn();
                // READONLY-free check: a node answers EXISTS only for its slots.
                redis::cmd("EXISTS").arg(key).query::<i64>(&mut c) == Ok(1)
            })
            .map(|n| n.port)
            .collect()
    }
}

fn five_cluster(c: &mut redis::cluster::ClusterConnection, words: &[&str]) -> [i64; 5] {
    let mut command = redis::cmd(words[0]);
    for w in &words[1..] {
        command.arg(*w);
    }
    let v: Vec<i64> = command.query(c).unwrap();
    v.try_into().unwrap()
}

#[test]
fn commands_route_by_key_and_limits_hold_on_every_node() {
    let cluster = Cluster::start();
    let c = &mut cluster.client();
    let mut ports = std::collections::HashSet::new();
    for i in 0..30 {
        let key = format!("rl:user:{i}");
        for n in 0..6 {
            let r = five_cluster(c, &["CL.THROTTLE", &key, "4", "1", "3600"]);
            assert_eq!(r[0], i64::from(n >= 5), "{key} call {n}");
        }
        let sw = format!("sw:{i}");
        for n in 0..4 {
            let r = five_cluster(c, &["SW.ALLOW", &sw, "3", "60"]);
            assert_eq!(r[0], i64::from(n >= 3), "{sw} call {n}");
        }
        let fw = format!("fw:{i}");
        assert_eq!(five_cluster(c, &["FW.INCR", &fw, "2", "60", "2"])[0], 0);
        assert_eq!(five_cluster(c, &["FW.INCR", &fw, "2", "60"])[0], 1);
        for k in [&key, &sw, &fw] {
            let holders = cluster.holder(k);
            assert_eq!(holders.len(), 1, "{k} is on {holders:?}");
            ports.insert(holders[0]);
        }
    }
    assert_eq!(ports.len(), 3, "keys spread over all three masters");

    // Hash tags keep one user's keys on one node.
    five_cluster(c, &["CL.THROTTLE", "{user42}:api", "4", "1", "60"]);
    five_cluster(c, &["SW.ALLOW", "{user42}:login", "3", "60"]);
    five_cluster(c, &["FW.INCR", "{user42}:daily", "3", "60", "ALIGN"]);
    let home = cluster.holder("{user42}:api");
    assert_eq!(cluster.holder("{user42}:login"), home);
    assert_eq!(cluster.holder("{user42}:daily"), home);

    // Several limits of one user in one call: one slot thanks to the tags.
    let mut all = redis::cmd("CL.THROTTLEALL");
    all.arg(2)
        .arg("{user42}:sec")
        .arg("{user42}:day")
        .arg("GCRA")
        .arg(4)
        .arg(1)
        .arg(1)
        .arg("FW")
        .arg(1000)
        .arg(86400)
        .arg("ALIGN");
    let v: Vec<i64> = all.query(c).unwrap();
    assert_eq!(v[0], 0, "{v:?}");
    assert_eq!(cluster.holder("{user42}:day"), home);
    // Keys in different slots are refused before anything runs.
    let n = &cluster.nodes[0];
    let e = err(&mut n.conn(), "CL.THROTTLEALL 2 {a}x {b}y SW 1 60 SW 1 60");
    assert!(e.starts_with("CROSSSLOT"), "{e}");

    // A plain client on the wrong node is redirected, which the cluster
    // client follows.
    let wrong = cluster
        .nodes
        .iter()
        .find(|n| !home.contains(&n.port))
        .unwrap();
    let e = err(&mut wrong.conn(), "CL.THROTTLE {user42}:api 4 1 60");
    assert!(e.starts_with("MOVED"), "{e}");
    let keys: Vec<String> = redis::cmd("COMMAND")
        .arg("GETKEYS")
        .arg("SW.ALLOW")
        .arg("{user42}:login")
        .arg(3)
        .arg(60)
        .query(&mut wrong.conn())
        .unwrap();
    assert_eq!(keys, ["{user42}:login"]);
}

/// Policies are per node: `redis-cli --cluster call` sets one on every
/// master (CL.POLICY takes no key, so each node accepts it), and then a
/// call on any key, routed to its slot's node, finds it.
#[test]
fn policies_set_on_every_node_with_cluster_call() {
    let cluster = Cluster::start();
    let first = format!("127.0.0.1:{}", cluster.nodes[0].port);
    let out = Command::new(cli())
        .args([
            "--cluster",
            "call",
            &first,
            "CL.POLICY",
            "SET",
            "api",
            "GCRA",
            "1",
            "1",
            "1h",
        ])
        .output()
        .expect("redis-cli");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    for n in &cluster.nodes {
        let names: Vec<String> = redis::cmd("CL.POLICY")
            .arg("LIST")
            .query(&mut n.conn())
            .unwrap();
        assert_eq!(names, ["api"], "node {}", n.port);
    }
    let c = &mut cluster.client();
    for i in 0..20 {
        let key = format!("user:{i}");
        assert_eq!(five_cluster(c, &["CL.LIMIT", &key, "api"])[0], 0);
        assert_eq!(five_cluster(c, &["CL.LIMIT", &key, "api"])[0], 0);
        assert_eq!(five_cluster(c, &["CL.LIMIT", &key, "api"])[0], 1);
    }
    // A node without the policy answers an error and writes nothing.
    let n = &cluster.nodes[1];
    let m = &mut n.conn();
    assert_eq!(cmd(m, "CL.POLICY DEL api"), Ok(redis::Value::Int(1)));
    let before: i64 = redis::cmd("DBSIZE").query(m).unwrap();
    let mut refused = 0;
    for i in 0..20 {
        let key = format!("other:{i}");
        let r = redis::cmd("CL.LIMIT")
            .arg(&key)
            .arg("api")
            .query::<Vec<i64>>(c);
        if let Err(e) = r {
            assert_eq!(error_text(e), "ERR unknown policy 'api'");
            refused += 1;
        }
    }
    assert!(refused > 0, "no key of node {} was tried", n.port);
    let after: i64 = redis::cmd("DBSIZE").query(m).unwrap();
    assert_eq!(before, after);
}
