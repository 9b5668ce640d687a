//! Clusters and sentinels.

use std::fs;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::resp::{call, field, Reply};
use crate::server::{free_port, fresh_dir, Clock, Server, Spec};

/// `masters` servers of `spec` formed into a cluster: the 16384 slots split
/// evenly in order, every node met with every other, ready once every node
/// reports `cluster_state:ok` and knows them all.
///
/// A master refuses to turn its state ok in its first 2 s of (server)
/// time, so nodes on a frozen clock ([`Clock::At`]) are moved 5 s on.
pub fn cluster(spec: &Spec, masters: usize) -> Vec<Server> {
    assert!(masters > 0, "a cluster has at least one master");
    let spec = Spec {
        cluster: true,
        ..spec.clone()
    };
    let nodes: Vec<Server> = (0..masters).map(|_| Server::start(spec.clone())).collect();
    let per = 16384 / masters;
    for (i, node) in nodes.iter().enumerate() {
        let last = if i + 1 == masters {
            16383
        } else {
            (i + 1) * per - 1
        };
        // Each master its own config epoch before they meet (as `redis-cli
        // --cluster create` sets them): masters that all start at epoch 0
        // must settle the collision by gossip first, and under a loaded
        // machine a node was seen still not taking a master's slots after
        // 60 s.
        let epoch = (i + 1).to_string();
        assert_eq!(
            node.call(&["CLUSTER", "SET-CONFIG-EPOCH", &epoch]),
            Reply::Status("OK".into()),
            "CLUSTER SET-CONFIG-EPOCH"
        );
        let slots: Vec<String> = (i * per..=last).map(|s| s.to_string()).collect();
        let mut args = vec!["CLUSTER", "ADDSLOTS"];
        args.extend(slots.iter().map(String::as_str));
        assert_eq!(
            node.call(&args),
            Reply::Status("OK".into()),
            "CLUSTER ADDSLOTS"
        );
    }
    for (i, a) in nodes.iter().enumerate() {
        for b in &nodes[i + 1..] {
            let r = a.call(&["CLUSTER", "MEET", "127.0.0.1", &b.port.to_string()]);
            assert_eq!(r, Reply::Status("OK".into()), "CLUSTER MEET");
        }
    }
    if let Clock::At(t) = spec.clock {
        for n in &nodes {
            n.set_time(t + 5_000_000_000);
        }
    }
    let known = masters.to_string();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let infos: Vec<Option<Reply>> = nodes
            .iter()
            .map(|n| call(n.port, &["CLUSTER", "INFO"]).ok())
            .collect();
        let formed = infos.iter().all(|i| {
            i.as_ref().is_some_and(|i| {
                field(i, "cluster_state").as_deref() == Some("ok")
                    && field(i, "cluster_known_nodes").as_deref() == Some(known.as_str())
            })
        });
        if formed {
            return nodes;
        }
        assert!(
            Instant::now() < deadline,
            "the cluster on {:?} did not form: {infos:?}",
            nodes.iter().map(|n| n.port).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A sentinel on loopback watching the master on `master` as `service`
/// (quorum 1), with extra `sentinel <line> ` configuration (such as
/// `down-after-milliseconds m 1000`), ready once it knows the master's
/// address. Killed when dropped.
pub struct Sentinel {
    pub port: u16,
    pub dir: PathBuf,
    child: Child,
}

impl Sentinel {
    pub fn start(
        binary: &std::path::Path,
        master: u16,
        service: &str,
        extra: &[String],
    ) -> Sentinel {
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_port();
            let dir = fresh_dir();
            fs::create_dir_all(&dir).expect("create the sentinel's directory");
            let conf = dir.join("sentinel.conf");
            let mut text = format!(
                "port {port}\nbind 127.0.0.1\ndir {}\nsentinel monitor {service} 127.0.0.1 {master} 1\n",
                dir.display()
            );
            for line in extra {
                text.push_str(&format!("sentinel {line}\n"));
            }
            fs::write(&conf, text).expect("write sentinel.conf");
            let log = fs::File::create(dir.join("sentinel.log")).expect("the sentinel's log");
            let mut cmd = Command::new(binary);
            crate::server::tie_to_parent(&mut cmd);
            let child = cmd
                .arg(&conf)
                .arg("--sentinel")
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("the log"))
                .stderr(log)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {} --sentinel: {e}", binary.display()));
            let mut s = Sentinel { port, dir, child };
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                if let Ok(Some(_)) = s.child.try_wait() {
                    last = s.log();
                    break;
                }
                let known = call(port, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", service]);
                if matches!(known, Ok(Reply::Array(Some(ref a))) if a.len() == 2) {
                    return s;
                }
                if Instant::now() > deadline {
                    panic!("the sentinel on {port} does not answer; log:\n{}", s.log());
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            if !last.contains("Address already in use") {
                break;
            }
        }
        panic!("the sentinel did not start; log:\n{last}");
    }

    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.join("sentinel.log")).unwrap_or_default()
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = fs::remove_dir_all(&self.dir);
    }
}
