//! The README's "Upgrading, replacing and removing", step by step: the
//! module cannot be unloaded; it takes over the original redis-cell's
//! state (0.2.2, from the crate registry, built by scripts/deps) and hands
//! it back; removing it needs the steps the README gives, and without them
//! the server refuses the file with the message the README quotes.

use crate::support::*;
use std::path::PathBuf;

/// The original redis-cell 0.2.2, built by scripts/deps.
fn original() -> String {
    let path = PathBuf::from(root!()).join("target/deps/redis-cell-0.2.2/libredis_cell.so");
    assert!(
        path.is_file(),
        "the original redis-cell is missing at {}: run scripts/deps",
        path.display()
    );
    path.to_str().unwrap().to_string()
}

/// A server without this module (modules loaded with MODULE LOAD), on
/// `dir` if given, with extra configuration.
fn plain(dir: Option<PathBuf>, mut config: Vec<(String, String)>) -> Server {
    if server_version().has_7_0() {
        config.push(("enable-module-command".into(), "yes".into()));
    }
    Server::with(Options {
        without_module: true,
        dir,
        config,
        ..Options::default()
    })
}

fn module_load(c: &mut redis::Connection, path: &str) {
    redis::cmd("MODULE")
        .arg("LOAD")
        .arg(path)
        .query::<()>(c)
        .unwrap_or_else(|e| panic!("MODULE LOAD {path}: {e}"));
}

/// Whether an RDB file saved by this module without policies and without
/// keys of its types loads on a server without it (Redis 7.2+, Valkey);
/// on Redis 6.2 and 7.0 every file carries the (empty) policy set.
fn rdb_without_aux() -> bool {
    server_version().has_redis(7, 2)
}

/// Saves the data in a file without module data, the README's way: an
/// RDB where it then carries none, else (Redis 6.2 and 7.0) an AOF without
/// an RDB preamble, which holds only commands (`SET ... PXAT` for the CL
/// and FW keys), rewritten now. Answers the configuration that loads it.
fn save_without_module_data(c: &mut redis::Connection) -> Vec<(String, String)> {
    if rdb_without_aux() {
        cmd(c, "SAVE").unwrap();
        return Vec::new();
    }
    cmd(c, "CONFIG SET aof-use-rdb-preamble no").unwrap();
    cmd(c, "CONFIG SET appendonly yes").unwrap();
    eventually("the AOF rewrite", || {
        let info: String = redis::cmd("INFO").arg("persistence").query(c).unwrap();
        info.contains("aof_rewrite_in_progress:0")
            && info.contains("aof_rewrite_scheduled:0")
            && info.contains("aof_last_bgrewrite_status:ok")
            && info.contains("aof_enabled:1")
    });
    config(&AOF_OF_COMMANDS)
}

#[test]
fn module_unload_is_refused() {
    let s = plain(None, Vec::new());
    let c = &mut s.conn();
    module_load(c, module_path().to_str().unwrap());
    assert_eq!(
        err(c, "MODULE UNLOAD redis-cell"),
        "ERR Error unloading module: the module exports one or more module-side data types, can't unload"
    );
    assert_eq!(five(c, "CL.THROTTLE k 15 30 60"), [0, 16, 15, -1, 2]);
}

/// The TAT a call of `CL.THROTTLE key 15 30 60` (2 s per request) writes
/// on a key whose TAT is ahead of now: exactly 2 s more, whatever the clock.
const STEP: i64 = 2 * SEC;

fn tat(c: &mut redis::Connection, key: &str) -> i64 {
    get(c, key)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{key} holds no TAT"))
}

#[test]
fn the_original_redis_cells_state_carries_over_and_back() {
    // Valkey loads modules with RTLD_DEEPBIND: the original reads the
    // system clock past the test clock, so both run on the real clock
    // there, and every check below holds on either.
    let real_clock = server_version().valkey;
    let start = |dir: Option<PathBuf>, config: Vec<(String, String)>, module: bool| {
        let mut config = config;
        if server_version().has_7_0() && !module {
            config.push(("enable-module-command".into(), "yes".into()));
        }
        Server::with(Options {
            without_module: !module,
            dir,
            config,
            real_clock,
            ..Options::default()
        })
    };
    // The original, loaded at run time, limits a key.
    let a = start(None, Vec::new(), false);
    let c = &mut a.conn();
    module_load(c, &original());
    for _ in 0..5 {
        assert_eq!(five(c, "CL.THROTTLE rl:k 15 30 60")[0], 0);
    }
    let before = tat(c, "rl:k");
    let expiry = expire_time_ms(c, "rl:k");
    cmd(c, "SAVE").unwrap();
    let dir = a.stop();

    // This module, started on the same files, continues it: the same TAT
    // and expiry, and its next call adds one request's 2 s to it.
    let b = start(Some(dir), Vec::new(), true);
    let c = &mut b.conn();
    assert_eq!(tat(c, "rl:k"), before);
    assert!((expire_time_ms(c, "rl:k") - expiry).abs() <= 1);
    let reply = five(c, "CL.THROTTLE rl:k 15 30 60");
    assert_eq!((reply[0], reply[1]), (0, 16), "{reply:?}");
    assert_eq!(tat(c, "rl:k"), before + STEP);
    if !real_clock {
        // At one frozen instant, the same reply as six calls of its own.
        for _ in 0..5 {
            five(c, "CL.THROTTLE rl:control 15 30 60");
        }
        assert_eq!(five(c, "CL.THROTTLE rl:control 15 30 60"), reply);
        cmd(c, "DEL rl:control").unwrap();
    }

    // And back.
    let config = save_without_module_data(c);
    let dir = b.stop();
    let a = start(Some(dir), config, false);
    let c = &mut a.conn();
    assert_eq!(tat(c, "rl:k"), before + STEP);
    module_load(c, &original());
    let reply = five(c, "CL.THROTTLE rl:k 15 30 60");
    assert_eq!((reply[0], reply[1]), (0, 16), "{reply:?}");
    assert_eq!(tat(c, "rl:k"), before + 2 * STEP);
}

/// A server with every kind of the module's state: a CL key, a sliding
/// window, a lease, a policy.
fn with_state() -> Server {
    let s = Server::start();
    let c = &mut s.conn();
    five(c, "CL.THROTTLE rl:k 15 30 60");
    five(c, "SW.ALLOW rl:sw 5 60");
    cmd(c, "CC.ACQUIRE rl:cc 3 30 ID worker-1").unwrap();
    cmd(c, "CL.POLICY SET api GCRA 5 1 60").unwrap();
    s
}

#[test]
fn without_the_steps_a_server_without_the_module_refuses_the_file() {
    let s = with_state();
    cmd(&mut s.conn(), "SAVE").unwrap();
    let dir = s.stop();
    let (_, log) = Server::refusing_to_start(Options {
        without_module: true,
        dir: Some(dir),
        ..Options::default()
    });
    assert!(
        log.contains(
            "The RDB file contains AUX module data I can't load: no matching module 'cell-pols'"
        ),
        "{log}"
    );
    // Without policies, a sliding window (or a lease) is what is refused
    // where the policy set is not saved when empty.
    let s = with_state();
    let c = &mut s.conn();
    cmd(c, "CL.POLICY DEL api").unwrap();
    cmd(c, "DEL rl:cc").unwrap();
    cmd(c, "SAVE").unwrap();
    let dir = s.stop();
    let (_, log) = Server::refusing_to_start(Options {
        without_module: true,
        dir: Some(dir),
        ..Options::default()
    });
    let want = if rdb_without_aux() {
        "The RDB file contains module data I can't load: no matching module type 'cell-swin'"
    } else {
        "The RDB file contains AUX module data I can't load: no matching module 'cell-pols'"
    };
    assert!(log.contains(want), "{log}");
}

#[test]
fn the_readmes_removal_steps_leave_a_file_any_server_loads() {
    let s = with_state();
    let c = &mut s.conn();
    // 1. The module types' keys, found by type, and the policies.
    for kind in ["cell-swin", "cell-conc"] {
        let (_, keys): (String, Vec<String>) = redis::cmd("SCAN")
            .arg(&["0", "TYPE", kind, "COUNT", "1000"])
            .query(c)
            .unwrap();
        assert_eq!(keys.len(), 1, "{kind}: {keys:?}");
        for key in keys {
            redis::cmd("UNLINK").arg(key).query::<()>(c).unwrap();
        }
    }
    let names: Vec<String> = redis::cmd("CL.POLICY").arg("LIST").query(c).unwrap();
    for name in names {
        redis::cmd("CL.POLICY")
            .arg("DEL")
            .arg(name)
            .query::<()>(c)
            .unwrap();
    }
    let tat = get(c, "rl:k").unwrap();
    // 2. A file without module data.
    let config = save_without_module_data(c);
    let dir = s.stop();
    // 3. The server without the module loads it, the CL key intact.
    let p = plain(Some(dir), config);
    let c = &mut p.conn();
    assert_eq!(get(c, "rl:k").as_deref(), Some(tat.as_str()));
    assert!(pttl(c, "rl:k") > 0);
    assert_eq!(cmd(c, "DBSIZE").unwrap(), Value::Int(1));
}
