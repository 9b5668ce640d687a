//! Master and replica: the replica receives the effect of each allowed
//! call, never the command, so it holds exactly the master's state even
//! when its own clock disagrees.

use crate::support::*;

/// Blocks until the replica has applied everything the master sent.
pub fn sync(master: &mut redis::Connection) {
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(master).unwrap();
    assert_eq!(acked, 1, "replica did not acknowledge");
}

fn command_calls(c: &mut redis::Connection, name: &str) -> i64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(c).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{name}:calls=")))
        .map_or(0, |rest| rest.split(',').next().unwrap().parse().unwrap())
}

#[test]
fn replica_holds_the_masters_state_whatever_its_clock() {
    let master = Server::start();
    let replica = replica_of(&master, vec![]);
    let m = &mut master.conn();
    let r = &mut replica.conn();

    let mut w = Workload::new(0x9E37_79B9_7F4A_7C15);
    w.run(m, 600, &mut |t| {
        master.set_time(t);
        // The replica's clock is off by seconds; it must not matter.
        replica.set_time(t + 7 * SEC + 123_456);
    });
    w.finish(m);
    assert!(
        w.writes > 100 && w.refused > 30,
        "workload too one-sided: {} / {}",
        w.writes,
        w.refused
    );
    sync(m);
    replica.set_time(w.now);

    let keys = Workload::keys();
    assert_eq!(snapshot(r, &keys), snapshot(m, &keys));
    let digest = |c: &mut redis::Connection| cmd(c, "DEBUG DIGEST").unwrap();
    assert_eq!(digest(r), digest(m), "whole-dataset digests differ");
    for name in [
        "cl.throttle",
        "cl.peek",
        "cl.throttleall",
        "sw.allow",
        "sw.peek",
        "fw.incr",
        "fw.peek",
        "cc.acquire",
        "cc.renew",
        "cc.release",
    ] {
        assert_eq!(command_calls(r, name), 0, "{name} must not be replicated");
    }
    // Every allowed write is one effect; refusals and peeks send nothing.
    let effects = ["set", "sw.record", "cc.hold", "cc.drop"]
        .map(|name| command_calls(r, name))
        .iter()
        .sum::<i64>();
    assert_eq!(effects, w.writes);

    // Promoted, the replica continues exactly where the master was.
    cmd(r, "REPLICAOF NO ONE").unwrap();
    cmd(m, "REPLICAOF NO ONE").unwrap();
    for line in [
        "CL.THROTTLE rl:cl:last 4 10 3600",
        "SW.ALLOW rl:sw:last 6 3600 3",
        "SW.ALLOW rl:swa:last 6 3600 APPROX",
        "FW.INCR rl:fw:last 5 3600",
        "FW.INCR rl:fwa:last 5 3600 ALIGN 4",
    ] {
        assert_eq!(five(r, line), five(m, line), "{line}");
    }
}

#[test]
fn peek_works_on_a_read_only_replica() {
    let master = Server::start();
    let replica = replica_of(&master, vec![]);
    let m = &mut master.conn();
    five(m, "CL.THROTTLE ro 4 1 10 2");
    sync(m);
    let r = &mut replica.conn();
    assert_eq!(five(r, "CL.PEEK ro 4 1 10"), [0, 5, 3, -1, 20]);
    let e = err(r, "CL.THROTTLE ro 4 1 10");
    assert!(e.starts_with("READONLY"), "{e}");
}

#[test]
fn effects_from_multi_eval_and_functions_replicate() {
    let master = Server::start();
    let replica = replica_of(&master, vec![]);
    let m = &mut master.conn();
    let body = "return redis.call('SW.ALLOW', KEYS[1], ARGV[1], ARGV[2])";
    // Functions came with Redis 7.0; before it the same body runs as EVAL.
    let functions = server_version().has_7_0();
    if functions {
        let lib = format!(
            "#!lua name=rl\nredis.register_function('sw', function(KEYS, ARGV) {body} end)"
        );
        redis::cmd("FUNCTION")
            .arg("LOAD")
            .arg(lib)
            .query::<String>(m)
            .unwrap();
    }
    for step in 0..5 {
        master.set_time(T0 + step * 700 * MS);
        replica.set_time(T0 + 3 * SEC);
        redis::pipe()
            .atomic()
            .cmd("CL.THROTTLE")
            .arg("rl:cl:0")
            .arg(2)
            .arg(3)
            .arg(1)
            .cmd("FW.INCR")
            .arg("rl:fw:0")
            .arg(3)
            .arg(2)
            .cmd("SW.ALLOW")
            .arg("rl:swa:0")
            .arg(3)
            .arg(2)
            .arg("APPROX")
            .query::<()>(m)
            .unwrap();
        redis::cmd("EVAL")
            .arg("return redis.call('CL.THROTTLE', KEYS[1], 1, 1, 1, 1)")
            .arg(1)
            .arg("rl:cl:1")
            .query::<()>(m)
            .unwrap();
        let mut call = if functions {
            redis::cmd("FCALL")
        } else {
            redis::cmd("EVAL")
        };
        call.arg(if functions { "sw" } else { body })
            .arg(1)
            .arg("rl:sw:0")
            .arg(3)
            .arg(2)
            .query::<()>(m)
            .unwrap();
    }
    sync(m);
    replica.set_time(T0 + 4 * 700 * MS);
    let keys = Workload::keys();
    assert_eq!(snapshot(&mut replica.conn(), &keys), snapshot(m, &keys));
}

/// A `COUNTALL` window's refused hits are writes too: replicas hold the
/// same count and expiry, from the effect, not the command.
#[test]
fn countall_refused_hits_reach_the_replica() {
    let master = Server::start();
    let replica = replica_of(&master, vec![]);
    let m = &mut master.conn();
    let r = &mut replica.conn();
    for _ in 0..4 {
        five(m, "FW.INCR c 2 60 COUNTALL");
    }
    cmd(m, "CL.THROTTLEALL 2 {t}a {t}b FW 1 60 COUNTALL GCRA 0 1 60").unwrap();
    cmd(m, "CL.THROTTLEALL 2 {t}a {t}b FW 1 60 COUNTALL GCRA 0 1 60").unwrap();
    sync(m);
    assert_eq!(get(r, "c").as_deref(), Some("4"));
    assert_eq!(get(r, "{t}a").as_deref(), Some("2"));
    let keys = ["c", "{t}a", "{t}b"].map(String::from);
    assert_eq!(snapshot(r, &keys), snapshot(m, &keys));
    assert_eq!(command_calls(r, "fw.incr"), 0);
}
