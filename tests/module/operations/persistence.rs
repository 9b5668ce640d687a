//! State survives restarts exactly: RDB, AOF and AOF rewrites hold the
//! effects with absolute times, so downtime does not shift any limit.

use crate::support::*;

/// `aof`: append-only file on; `preamble`: rewrites start with an RDB
/// snapshot (the default) rather than commands (`SW.LOAD` for windows).
fn with_dir(dir: std::path::PathBuf, aof: bool, preamble: bool) -> Server {
    let mut config = vec![("appendfsync".to_string(), "always".to_string())];
    if aof {
        config.push(("appendonly".into(), "yes".into()));
    }
    if !preamble {
        config.push(("aof-use-rdb-preamble".into(), "no".into()));
    }
    Server::with(Options {
        config,
        dir: Some(dir),
        ..Options::default()
    })
}

fn fresh(name: &str, aof: bool, preamble: bool) -> Server {
    with_dir(fresh_dir(&format!("persist-{name}")), aof, preamble)
}

/// Runs a workload, persists with `persist`, restarts after 5 s of
/// downtime, and checks every key is byte-identical with the same
/// absolute expiry.
fn survives_restart(
    name: &str,
    aof: bool,
    preamble: bool,
    persist: impl Fn(&mut redis::Connection),
) {
    let s = fresh(name, aof, preamble);
    let c = &mut s.conn();
    let mut w = Workload::new(7);
    w.run(c, 300, &mut |t| s.set_time(t));
    w.finish(c);
    let keys = Workload::keys();
    let before = snapshot(c, &keys);
    persist(c);
    // Restart after 5 s of downtime.
    let after_downtime = w.now + 5 * SEC;
    let s = with_dir(s.stop_until(after_downtime), aof, preamble);
    let c = &mut s.conn();
    let expected = after_restart_at(before, after_downtime);
    assert!(live(&expected) >= 5);
    assert_eq!(snapshot(c, &keys), expected);
}

#[test]
fn rdb_save_and_restart() {
    survives_restart("rdb", false, true, |c| {
        cmd(c, "SAVE").unwrap();
    });
}

#[test]
fn aof_restart_is_not_shifted_by_downtime() {
    survives_restart("aof", true, true, |_| {});
}

#[test]
fn bgrewriteaof_then_restart() {
    survives_restart("rewrite", true, true, rewrite_aof);
}

/// Without the RDB preamble the rewrite stores windows as `SW.LOAD`.
#[test]
fn bgrewriteaof_as_commands_then_restart() {
    survives_restart("rewrite-commands", true, false, rewrite_aof);
}
