//! The Functions twin's writes reach replicas and the AOF as effects with
//! absolute times: a replica whose clock disagrees holds exactly the
//! master's keys, and an AOF restart after downtime reproduces them.

use crate::twin;

use crate::support::*;
use crate::twin::gen::{Gen, KINDS};
use crate::twin::*;

/// Runs `steps` random calls of every command through the twin on the
/// plain keys of [`Gen`], moving the clock with `set_time`; the clock's
/// last instant.
fn twin_workload(
    c: &mut redis::Connection,
    twin: &Twin,
    seed: u64,
    steps: usize,
    set_time: &mut dyn FnMut(i64),
) -> i64 {
    let mut gen = Gen::new(seed);
    let mut now = T0;
    let mut allowed = 0;
    for _ in 0..steps {
        // Small steps: most state is still alive at the end.
        now += gen.below(200_000) as i64 * 1_000;
        set_time(now);
        let words = gen.call(5);
        let reply = twin.call(c, &words);
        if let Ok(Value::Array(v)) = &reply {
            if v.first() == Some(&Value::Int(0)) {
                allowed += 1;
            }
            // Generated lease ids, for later renewals and releases.
            if let Some(Value::BulkString(id)) = v.get(5) {
                gen.generated.push(id.clone());
            }
        }
    }
    assert!(
        allowed > steps / 4,
        "workload too one-sided: {allowed} allowed"
    );
    now
}

fn keys() -> Vec<String> {
    let mut keys = Vec::new();
    for kind in KINDS {
        for i in 0..3 {
            keys.push(format!("{kind}:{i}"));
        }
    }
    keys
}

fn calls(c: &mut redis::Connection, name: &str) -> i64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(c).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{name}:calls=")))
        .map_or(0, |rest| rest.split(',').next().unwrap().parse().unwrap())
}

#[test]
fn replica_holds_the_twins_state_whatever_its_clock() {
    let master = Server::start();
    let replica = replica_of(&master, vec![]);
    let m = &mut master.conn();
    let twin = Twin::load(m);
    let now = twin_workload(m, &twin, 0x2E91_1CA5, 800, &mut |t| {
        master.set_time(t);
        replica.set_time(t + 7 * SEC + 123_456);
    });
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(m).unwrap();
    assert_eq!(acked, 1, "replica did not acknowledge");
    replica.set_time(now);
    let r = &mut replica.conn();
    let keys = keys();
    let on_master = snapshot(m, &keys);
    assert!(live(&on_master) >= 6, "too few keys alive: {on_master:?}");
    assert_eq!(snapshot(r, &keys), on_master);
    let digest = |c: &mut redis::Connection| cmd(c, "DEBUG DIGEST").unwrap();
    assert_eq!(digest(r), digest(m), "whole-dataset digests differ");
    // Effects, never the call: the replica ran no function or script.
    for name in ["fcall", "evalsha", "eval"] {
        assert_eq!(calls(r, name), 0, "{name} must not be replicated");
    }
    // Peeks run on the read-only replica (FCALL_RO where it exists).
    if server_version().has_7_0() {
        for line in [
            "cl_peek 1 cl:0 4 10 2",
            "fw_peek 1 fw:0 5 1",
            "sw_peek 1 sw:0 6 2",
            "cc_peek 1 cc:0 3",
        ] {
            let mut words = vec![b"FCALL_RO".to_vec()];
            words.extend(twin::words(line));
            let refs: Vec<&[u8]> = words.iter().map(Vec::as_slice).collect();
            let on_replica = run(r, &refs);
            assert_eq!(on_replica, run(m, &refs), "{line}");
            assert!(
                !matches!(&on_replica, Err(e) if !e.starts_with("WRONGTYPE") && !e.starts_with("ERR key holds")),
                "{line}: {on_replica:?}"
            );
        }
        let e = err(r, "FCALL cl_throttle 1 cl:0 4 10 2");
        assert!(e.starts_with("READONLY"), "{e}");
    }
}

#[test]
fn aof_restart_reproduces_the_twins_state() {
    let aof = [("appendonly", "yes"), ("appendfsync", "always")];
    let s = Server::on(fresh_dir("twin-aof"), &aof);
    let c = &mut s.conn();
    let twin = Twin::load(c);
    let now = twin_workload(c, &twin, 0xA0F_2026, 600, &mut |t| s.set_time(t));
    let keys = keys();
    let before = snapshot(c, &keys);
    assert!(live(&before) >= 6, "too few keys alive: {before:?}");
    // 2 s of downtime.
    let after_downtime = now + 2 * SEC;
    let s = Server::on(s.stop_until(after_downtime), &aof);
    let c = &mut s.conn();
    let expected = after_restart_at(before, after_downtime);
    assert!(
        live(&expected) >= 3,
        "too few keys outlive the downtime: {expected:?}"
    );
    assert_eq!(snapshot(c, &keys), expected);
}
