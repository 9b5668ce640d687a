//! The policy set in RDB files, black-box: which files need the module to
//! load (Redis 7.2+ and Valkey write the set only when there is one; Redis
//! 6.2 and 7.0 always write it), and that every load (`DEBUG RELOAD`, a
//! restart, an AOF, a replica's full sync) ends with exactly the set the
//! data carries, none if it carries none.

use crate::support::*;
use redis::Value;

/// Whether the server calls `aux_save2` (Redis 7.2+, every Valkey).
fn has_aux_save2() -> bool {
    server_version().has_redis(7, 2)
}

fn plain(dir: std::path::PathBuf) -> Options {
    Options {
        dir: Some(dir),
        without_module: true,
        ..Options::default()
    }
}

/// A server without the module must refuse the file in `dir` for the
/// policy data in it.
fn refused_without_the_module(dir: &std::path::Path) {
    let (status, log) = Server::refusing_to_start(plain(dir.to_path_buf()));
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(
        log.contains("AUX module data I can't load: no matching module 'cell-pols'"),
        "{log}"
    );
}

/// Keys of plain types only: what the limiters on strings write.
fn plain_keys(c: &mut redis::Connection) {
    five(c, "CL.THROTTLE gcra 4 5 60");
    five(c, "FW.INCR fixed 10 60s");
    ok(c, "SET plain value");
}

#[test]
fn an_rdb_without_policies_loads_without_the_module() {
    let s = Server::on(fresh_dir("policies-rdb-plain"), &[]);
    let c = &mut s.conn();
    plain_keys(c);
    ok(c, "SAVE");
    let dir = s.stop();
    if has_aux_save2() {
        // No policy: the file has no trace of the module.
        let p = Server::with(plain(dir.clone()));
        let c = &mut p.conn();
        assert_eq!(dbsize(c), 3);
        assert_eq!(get(c, "plain").as_deref(), Some("value"));
        assert_eq!(get(c, "fixed").as_deref(), Some("1"));
        assert!(get(c, "gcra").is_some());
        drop(p);
    } else {
        // Redis 6.2 and 7.0 always write the (empty) set.
        refused_without_the_module(&dir);
    }
    // With a policy, the file needs the module, on every server.
    let s = Server::on(dir, &[]);
    let c = &mut s.conn();
    assert_eq!(dbsize(c), 3);
    assert!(policy_list(c).is_empty());
    ok(c, "CL.POLICY SET api GCRA 4 5 1s");
    ok(c, "SAVE");
    let dir = s.stop();
    refused_without_the_module(&dir);
    // The module loads it.
    let s = Server::on(dir, &[]);
    assert_eq!(policy_list(&mut s.conn()), ["api"]);
}

#[test]
fn reload_and_restart_keep_the_policies() {
    let s = Server::on(fresh_dir("policies-rdb-reload"), &[]);
    let c = &mut s.conn();
    plain_keys(c);
    ok(c, "CL.POLICY SET api GCRA 4 5 1s");
    ok(c, "CL.POLICY SET day FW 100 day SHADOW");
    ok(c, "DEBUG RELOAD");
    assert_eq!(policy_list(c), ["api", "day"]);
    assert_eq!(dbsize(c), 3);
    ok(c, "SAVE");
    let s = Server::on(s.stop(), &[]);
    let c = &mut s.conn();
    assert_eq!(policy_list(c), ["api", "day"]);
    assert_eq!(dbsize(c), 3);
}

/// A load replaces the set with the file's, also when the file has none
/// (on Redis 7.2+ and Valkey it then carries no policy data at all).
#[test]
fn a_reload_ends_with_exactly_the_files_policies() {
    let s = Server::on(fresh_dir("policies-rdb-exact"), &[]);
    let c = &mut s.conn();
    plain_keys(c);
    ok(c, "SAVE");
    ok(c, "CL.POLICY SET later GCRA 4 5 1s");
    ok(c, "DEBUG RELOAD NOSAVE");
    assert!(policy_list(c).is_empty());
    assert_eq!(dbsize(c), 3);
    ok(c, "CL.POLICY SET saved GCRA 4 5 1s");
    ok(c, "SAVE");
    ok(c, "CL.POLICY SET later GCRA 4 5 1s");
    assert_eq!(cmd(c, "CL.POLICY DEL saved"), Ok(Value::Int(1)));
    ok(c, "DEBUG RELOAD NOSAVE");
    assert_eq!(policy_list(c), ["saved"]);
}

/// An AOF is the whole truth: its load starts from no policies and
/// replays its own.
#[test]
fn an_aof_load_ends_with_exactly_its_policies() {
    let s = Server::with(Options::with_config(&[
        ("appendonly", "yes"),
        ("appendfsync", "always"),
    ]));
    let c = &mut s.conn();
    ok(c, "CL.POLICY SET api GCRA 4 5 1s");
    ok(c, "CL.POLICY SET gone GCRA 4 5 1s");
    assert_eq!(cmd(c, "CL.POLICY DEL gone"), Ok(Value::Int(1)));
    ok(c, "DEBUG LOADAOF");
    assert_eq!(policy_list(c), ["api"]);
}

fn sync_full(c: &mut redis::Connection) -> i64 {
    let info: String = redis::cmd("INFO").arg("stats").query(c).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("sync_full:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no sync_full in {info}"))
}

/// Whether the replica's link to its master is up. Asked only after the
/// master counted the new full sync: the replica had then sent its `PSYNC`
/// and says up again only once the load ended (asked before, it could
/// still answer from the old link, before it read that link's end).
fn link_up(r: &mut redis::Connection) -> bool {
    let info: String = redis::cmd("INFO").arg("replication").query(r).unwrap();
    info.contains("master_link_status:up")
}

/// A replica that had its own policies ends a full sync with exactly its
/// master's: none, or other ones; with the RDB on disk and diskless (and
/// on Valkey over a second connection, dual-channel replication).
#[test]
fn a_full_sync_leaves_exactly_the_masters_policies() {
    let mut modes = vec![("disabled", "no"), ("swapdb", "no"), ("on-empty-db", "no")];
    if server_version().valkey {
        modes.extend([("disabled", "yes"), ("swapdb", "yes")]);
    }
    for (load, dual) in modes {
        let dual_channel = |mut config: Vec<(String, String)>| {
            if server_version().valkey {
                config.push(("dual-channel-replication-enabled".into(), dual.into()));
            }
            config
        };
        let master = Server::with(Options {
            config: dual_channel(vec![("repl-diskless-sync".into(), "yes".into())]),
            ..Options::default()
        });
        let m = &mut master.conn();
        ok(m, "SET k v");
        let replica = replica_of(
            &master,
            dual_channel(vec![("repl-diskless-load".into(), load.into())]),
        );
        let r = &mut replica.conn();
        for masters in [vec![], vec!["m1", "m2"]] {
            for name in &masters {
                ok(m, &format!("CL.POLICY SET {name} GCRA 1 1 1"));
            }
            ok(r, "REPLICAOF NO ONE");
            ok(r, "CL.POLICY SET stale GCRA 1 1 1");
            let before = sync_full(m);
            ok(r, &format!("REPLICAOF 127.0.0.1 {}", master.port));
            eventually("a full sync", || sync_full(m) > before && link_up(r));
            assert_eq!(policy_list(r), masters, "{load}, dual channel {dual}");
            assert_eq!(get(r, "k").as_deref(), Some("v"), "{load}");
        }
    }
}

/// A replica that loses its link for longer than the master's backlog
/// covers gets a full sync from the same master; with `repl-diskless-load
/// swapdb` Redis 7.0+ and Valkey then load it asynchronously (the old
/// dataset is served until the new one is complete). It too ends with
/// exactly the master's policies (a writable replica's own are dropped).
#[test]
fn an_async_full_sync_leaves_exactly_the_masters_policies() {
    let master = Server::with(Options::with_config(&[
        ("repl-diskless-sync", "yes"),
        ("repl-backlog-size", "16384"),
    ]));
    let m = &mut master.conn();
    let replica = replica_of(
        &master,
        vec![
            ("repl-diskless-load".into(), "swapdb".into()),
            ("replica-read-only".into(), "no".into()),
        ],
    );
    let r = &mut replica.conn();
    for masters in [vec![], vec!["m1"]] {
        for name in &masters {
            ok(m, &format!("CL.POLICY SET {name} GCRA 1 1 1"));
        }
        ok(r, "CL.POLICY SET stale GCRA 1 1 1");
        let before = sync_full(m);
        // Drop the link and write more than the backlog holds, in one
        // transaction: the replica reconnects at once, so it must find the
        // backlog already past where it was and cannot continue.
        let mut fill = redis::pipe();
        fill.atomic()
            .cmd("CLIENT")
            .arg(&["KILL", "TYPE", "replica"])
            .ignore();
        for i in 0..8 {
            fill.cmd("SET")
                .arg(format!("fill{i}"))
                .arg(vec![b'x'; 8192])
                .ignore();
        }
        fill.query::<()>(m).unwrap();
        eventually("a full sync", || sync_full(m) > before && link_up(r));
        assert_eq!(policy_list(r), masters);
        assert_eq!(dbsize(r), 8);
    }
}
