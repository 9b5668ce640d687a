//! A policy change is a write wherever the server asks: it waits out
//! `CLIENT PAUSE ... WRITE` and failovers (a propagation while the server
//! pauses writes would abort it), is refused under OOM, NOREPLICAS, in
//! read-only scripts and on replicas, while `GET`, `LIST` and `HELP` run
//! everywhere; the module's own AOF-rewrite writes wait for the pause to
//! end; and `-@admin` removes the operators' commands on every server.

use crate::support::*;
use redis::Value;
use std::time::Duration;

fn aof_server() -> Server {
    Server::with(Options::with_config(&[("appendonly", "yes")]))
}

fn names(c: &mut redis::Connection) -> Vec<String> {
    match cmd(c, "CL.POLICY LIST").unwrap() {
        Value::Array(items) => items
            .iter()
            .map(|v| match v {
                Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                other => panic!("{other:?}"),
            })
            .collect(),
        other => panic!("CL.POLICY LIST: {other:?}"),
    }
}

/// Sends `lines` (one transaction if several) on a connection of its own
/// while the server pauses writes: they must wait, never run, until the
/// pause ends; the server then answers them and is still up.
fn held_by_pause(
    s: &Server,
    lines: &'static [&'static str],
    check: impl Fn(&mut redis::Connection),
) {
    let c = &mut s.conn();
    cmd(c, "CLIENT PAUSE 60000 WRITE").unwrap();
    let port = s.port;
    let sender = std::thread::spawn(move || {
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
        let mut w = client.get_connection().unwrap();
        lines.iter().map(|l| cmd(&mut w, l)).collect::<Vec<_>>()
    });
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !sender.is_finished(),
        "{lines:?} ran during CLIENT PAUSE WRITE"
    );
    // Reads run during the pause. Redis 6.2 has no subcommands: there the
    // whole command waits.
    if server_version().has_7_0() {
        check(c);
    }
    cmd(c, "CLIENT UNPAUSE").unwrap();
    let replies = sender.join().unwrap();
    for (line, reply) in lines.iter().zip(&replies) {
        assert!(reply.is_ok(), "{line}: {reply:?}");
    }
    ping(c);
}

#[test]
fn policy_changes_wait_for_a_write_pause_and_never_abort_the_server() {
    let s = aof_server();
    let _replica = replica_of(&s, vec![]);
    let c = &mut s.conn();
    cmd(c, "CL.POLICY SET a GCRA 1 1 1").unwrap();
    held_by_pause(&s, &["CL.POLICY SET b GCRA 1 1 1"], |c| {
        assert_eq!(names(c), ["a"]);
        // GET and HELP are reads: they run during the pause.
        assert!(cmd(c, "CL.POLICY GET a").is_ok());
        assert!(cmd(c, "CL.POLICY HELP").is_ok());
    });
    assert_eq!(names(c), ["a", "b"]);
    held_by_pause(&s, &["CL.POLICY DEL b"], |c| {
        assert_eq!(names(c), ["a", "b"])
    });
    assert_eq!(names(c), ["a"]);
    held_by_pause(
        &s,
        &[
            "MULTI",
            "CL.POLICY SET c GCRA 1 1 1",
            "CL.POLICY DEL a",
            "EXEC",
        ],
        |c| assert_eq!(names(c), ["a"]),
    );
    assert_eq!(names(c), ["c"]);
    cmd(c, "CL.POLICY SET c GCRA 1 1 1 TRIAL GCRA 5 5 1").unwrap();
    held_by_pause(&s, &["CL.POLICY PROMOTE c"], |c| {
        assert!(format!("{:?}", cmd(c, "CL.POLICY GET c")).contains("trial"))
    });
    assert!(!format!("{:?}", cmd(c, "CL.POLICY GET c")).contains("trial"));
}

#[test]
fn read_only_scripts_cannot_change_policies() {
    if !server_version().has_7_0() {
        // No EVAL_RO or FCALL_RO before 7.0.
        return;
    }
    let s = aof_server();
    let c = &mut s.conn();
    let e = run(
        c,
        &[
            b"EVAL_RO",
            b"return redis.call('CL.POLICY','SET','p','GCRA','1','1','1')",
            b"0",
        ],
    )
    .unwrap_err();
    assert!(
        e.starts_with("ERR Write commands are not allowed from read-only scripts"),
        "{e}"
    );
    run(
        c,
        &[
            b"FUNCTION",
            b"LOAD",
            b"#!lua name=pol\nredis.register_function{function_name='pset', callback=function() return redis.call('CL.POLICY','SET','p','GCRA','1','1','1') end, flags={'no-writes'}}",
        ],
    )
    .unwrap();
    let e = err(c, "FCALL_RO pset 0");
    assert!(
        e.starts_with("ERR Write commands are not allowed from read-only scripts"),
        "{e}"
    );
    assert!(names(c).is_empty());
    // Reads are allowed there.
    assert!(run(
        c,
        &[b"EVAL_RO", b"return redis.call('CL.POLICY','LIST')", b"0"]
    )
    .is_ok());
    ping(c);
}

#[test]
fn oom_and_noreplicas_refuse_policy_changes_as_any_write() {
    let s = aof_server();
    let c = &mut s.conn();
    cmd(c, "CL.POLICY SET a GCRA 1 1 1").unwrap();
    cmd(c, "CONFIG SET min-replicas-to-write 1").unwrap();
    assert_eq!(
        err(c, "CL.POLICY SET b GCRA 1 1 1"),
        "NOREPLICAS Not enough good replicas to write."
    );
    assert_eq!(
        err(c, "CL.POLICY DEL a"),
        "NOREPLICAS Not enough good replicas to write."
    );
    assert_eq!(names(c), ["a"]);
    cmd(c, "CONFIG SET min-replicas-to-write 0").unwrap();
    cmd(c, "CONFIG SET maxmemory 1").unwrap();
    assert_eq!(
        err(c, "CL.POLICY SET b GCRA 1 1 1"),
        "OOM command not allowed when used memory > 'maxmemory'."
    );
    // Removing frees memory: allowed under OOM, as DEL is.
    assert_eq!(cmd(c, "CL.POLICY DEL a"), Ok(Value::Int(1)));
    cmd(c, "CONFIG SET maxmemory 0").unwrap();
    assert!(names(c).is_empty());
}

#[test]
fn replicas_read_policies_and_refuse_changes() {
    let s = Server::start();
    let replica = replica_of(&s, vec![]);
    cmd(&mut s.conn(), "CL.POLICY SET a GCRA 1 1 1").unwrap();
    let r = &mut replica.conn();
    eventually("policy replicated", || names(r) == ["a"]);
    assert!(cmd(r, "CL.POLICY GET a").is_ok());
    assert_eq!(
        err(r, "CL.POLICY SET b GCRA 1 1 1"),
        "READONLY You can't write against a read only replica."
    );
    assert_eq!(
        err(r, "CL.POLICY DEL a"),
        "READONLY You can't write against a read only replica."
    );
}

#[test]
fn a_failover_that_waits_for_its_replica_holds_policy_changes() {
    let s = aof_server();
    let replica = replica_of(&s, vec![]);
    let c = &mut s.conn();
    cmd(c, "CL.POLICY SET a GCRA 1 1 1").unwrap();
    // The replica sleeps, so the failover pauses the master's writes while
    // it waits for the replica's offset.
    let r_port = replica.port;
    let sleeper = std::thread::spawn(move || {
        let client = redis::Client::open(format!("redis://127.0.0.1:{r_port}/")).unwrap();
        let mut r = client.get_connection().unwrap();
        let _ = cmd(&mut r, "DEBUG SLEEP 2");
    });
    std::thread::sleep(Duration::from_millis(100));
    cmd(c, "SET x 1").unwrap();
    cmd(
        c,
        &format!("FAILOVER TO 127.0.0.1 {} TIMEOUT 5000", replica.port),
    )
    .unwrap();
    let port = s.port;
    let change = std::thread::spawn(move || {
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
        let mut w = client.get_connection().unwrap();
        cmd(&mut w, "CL.POLICY SET b GCRA 1 1 1")
    });
    sleeper.join().unwrap();
    let reply = change.join().unwrap();
    // Held until the failover ended: then applied (the failover timed out
    // or was aborted) or refused by what is now a replica.
    match &reply {
        Ok(Value::Okay) => {}
        Err(e) if e.starts_with("READONLY") => {}
        other => panic!("CL.POLICY SET during a failover: {other:?}"),
    }
    ping(c);
    ping(&mut replica.conn());
}

#[test]
fn an_aof_rewrite_during_a_pause_writes_the_policies_once_it_ends() {
    let s = Server::with(Options::with_config(&AOF_OF_COMMANDS));
    let _replica = replica_of(&s, vec![]);
    let c = &mut s.conn();
    cmd(c, "CL.POLICY SET a GCRA 1 1 1").unwrap();
    cmd(c, "CLIENT PAUSE 60000 WRITE").unwrap();
    cmd(c, "BGREWRITEAOF").unwrap();
    eventually("rewrite done", || {
        let info: String = redis::cmd("INFO").arg("persistence").query(c).unwrap();
        info.contains("aof_rewrite_in_progress:0") && !info.contains("aof_rewrite_scheduled:1")
    });
    // The module's timer waits while writes are paused.
    std::thread::sleep(Duration::from_millis(300));
    ping(c);
    cmd(c, "CLIENT UNPAUSE").unwrap();
    // Its retry is a timer: the test clock must move for it to fire.
    s.set_time(T0 + 1_000_000_000);
    let dir = s.dir.clone();
    eventually("policies written after the new base", || {
        aof_commands(&dir)
            .iter()
            .any(|w| w.first().map(String::as_str) == Some("CL.POLICY"))
    });
    let dir = s.stop();
    let s = Server::on(dir, &AOF_OF_COMMANDS);
    assert_eq!(names(&mut s.conn()), ["a"]);
}

/// `+@all -@admin` leaves the operators' commands out on every server,
/// also where the server gives module commands no category (6.2, 7.0).
#[test]
fn minus_admin_removes_the_operators_commands() {
    let s = Server::start();
    let c = &mut s.conn();
    cmd(c, "CL.POLICY SET a GCRA 1 1 1").unwrap();
    cmd(c, "ACL SETUSER broad on >pw ~* +@all -@admin").unwrap();
    cmd(c, "ACL SETUSER nodanger on >pw ~* +@all -@dangerous").unwrap();
    cmd(c, "ACL SETUSER ops on >pw ~* -@all +cl.policy +cl.top").unwrap();
    let login = |user: &str| {
        let mut u = s.user_conn();
        cmd(&mut u, &format!("AUTH {user} pw")).unwrap();
        u
    };
    for user in ["broad", "nodanger"] {
        let u = &mut login(user);
        for (line, name) in [
            ("CL.POLICY LIST", "cl.policy|list"),
            ("CL.POLICY GET a", "cl.policy|get"),
            ("CL.POLICY SET b GCRA 1 1 1", "cl.policy|set"),
            ("CL.POLICY DEL a", "cl.policy|del"),
            ("CL.TOP", "cl.top"),
        ] {
            let e = err(u, line);
            assert!(
                e.starts_with("NOPERM") && e.contains(&format!("'{name}'")),
                "{user}: {line}: {e}"
            );
        }
        // The applications' commands stay.
        assert!(cmd(u, "CL.THROTTLE k 1 1 1").is_ok());
    }
    let u = &mut login("ops");
    assert!(cmd(u, "CL.POLICY SET b GCRA 1 1 1").is_ok());
    assert!(cmd(u, "CL.TOP").is_ok());
    assert_eq!(names(c), ["a", "b"]);
}

#[test]
fn help_and_unknown_subcommands() {
    let s = Server::start();
    let c = &mut s.conn();
    let Value::Array(lines) = cmd(c, "CL.POLICY HELP").unwrap() else {
        panic!("HELP is an array")
    };
    assert!(lines.len() >= 5, "{lines:?}");
    assert_eq!(
        err(c, "CL.POLICY show x"),
        "ERR unknown subcommand 'show'. Try CL.POLICY HELP."
    );
}
