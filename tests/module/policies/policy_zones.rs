//! A policy's time zone travels with it: a node whose time zone database
//! lacks the zone (an older tzdata, a custom `TZDIR`) still loads, syncs,
//! restarts and decides the same windows as the node where the policy was
//! set; where no rules came with it (an older file), the policy is kept,
//! logged by name, and the calls that name it answer an error naming the
//! zone.

use crate::support::*;
use redis::Value;
use std::path::PathBuf;

/// A time zone database that has one zone the system's lacks:
/// `Test/Newzone`, with the rules of Asia/Kathmandu (+05:45).
fn tzdir_with_new_zone() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("redis-cell-tz-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("Test")).unwrap();
    std::fs::create_dir_all(dir.join("Etc")).unwrap();
    std::fs::copy(
        "/usr/share/zoneinfo/Asia/Kathmandu",
        dir.join("Test/Newzone"),
    )
    .expect("the system time zone database (Debian's tzdata)");
    std::fs::copy("/usr/share/zoneinfo/Etc/UTC", dir.join("Etc/UTC")).unwrap();
    dir
}

fn with_new_zone(mut opts: Options) -> Options {
    opts.env
        .push(("TZDIR".into(), tzdir_with_new_zone().display().to_string()));
    opts
}

fn policy_fields(c: &mut redis::Connection, name: &str) -> Vec<String> {
    match cmd(c, &format!("CL.POLICY GET {name}")) {
        Ok(Value::Array(items)) => items
            .iter()
            .map(|v| match v {
                Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                Value::Int(n) => n.to_string(),
                other => format!("{other:?}"),
            })
            .collect(),
        other => panic!("CL.POLICY GET {name}: {other:?}"),
    }
}

/// What a daily window in Asia/Kathmandu answers at the test clock's
/// instant, from a policy this server resolves itself.
fn kathmandu_day(c: &mut redis::Connection) -> [i64; 5] {
    cmd(c, "CL.POLICY SET reference FW 3 day TZ Asia/Kathmandu").unwrap();
    five(c, "CL.LIMIT ref:k reference")
}

#[test]
fn a_replica_without_the_zone_syncs_and_decides_the_masters_windows() {
    let master = Server::with(with_new_zone(Options::default()));
    let m = &mut master.conn();
    // Set before the replica exists: it arrives by full sync (RDB aux).
    cmd(m, "CL.POLICY SET daily FW 3 day TZ Test/Newzone").unwrap();
    let on_master = five(m, "CL.LIMIT m:k daily");
    let replica = replica_of(&master, vec![]);
    // And one set while the replica is in sync: by the replication stream.
    cmd(m, "CL.POLICY SET daily2 FW 5 day TZ test/newzone").unwrap();
    let r = &mut replica.conn();
    eventually(
        "both policies on the replica",
        || matches!(cmd(r, "CL.POLICY LIST"), Ok(Value::Array(v)) if v.len() == 2),
    );
    assert_eq!(
        policy_fields(r, "daily")[1],
        "FW 3 day TZ Test/Newzone",
        "GET shows the words as set"
    );
    assert!(!policy_fields(r, "daily").contains(&"unusable".to_string()));
    // Promoted, it decides the master's windows: Kathmandu's days.
    cmd(r, "REPLICAOF NO ONE").unwrap();
    let on_replica = five(r, "CL.LIMIT r:k daily");
    assert_eq!(on_replica, on_master);
    assert_eq!(on_replica, kathmandu_day(r));
    assert_eq!(five(r, "CL.LIMIT r:k2 daily2")[4], on_master[4]);
    assert!(!replica.log().contains("cannot be used"));
}

#[test]
fn a_restart_without_the_zone_keeps_the_policy_and_its_windows() {
    let s = Server::with(with_new_zone(Options::default()));
    let c = &mut s.conn();
    cmd(c, "CL.POLICY SET daily FW 3 day TZ Test/Newzone").unwrap();
    let before = five(c, "CL.LIMIT a daily");
    cmd(c, "SAVE").unwrap();
    let dir = s.stop();
    // The same data, a server whose database lacks the zone.
    let s = Server::on(dir, &[]);
    let c = &mut s.conn();
    let after = five(c, "CL.LIMIT b daily");
    assert_eq!(after, before);
    assert_eq!(after, kathmandu_day(c));
}

#[test]
fn an_aof_restart_without_the_zone_keeps_the_rules_it_wrote() {
    let s = Server::with(with_new_zone(Options::with_config(&AOF_OF_COMMANDS)));
    let c = &mut s.conn();
    cmd(c, "CL.POLICY SET daily FW 3 day TZ Test/Newzone").unwrap();
    let before = five(c, "CL.LIMIT a daily");
    let dir = s.stop();
    let s = Server::on(dir, &AOF_OF_COMMANDS);
    let c = &mut s.conn();
    assert_eq!(five(c, "CL.LIMIT b daily"), before);
}

/// An AOF written before the rules travelled (`CL.POLICY SET` with a zone
/// and no `ZONEINFO`), replayed where the zone is missing: the server
/// starts, keeps the policy, logs its name, and calls answer why.
#[test]
fn a_policy_whose_zone_cannot_be_resolved_is_kept_logged_and_refused_clearly() {
    let s = Server::with(Options::with_config(&AOF_OF_COMMANDS));
    cmd(&mut s.conn(), "CL.POLICY SET other GCRA 1 1 1").unwrap();
    let dir = s.stop();
    // Redis 7.0+: the incremental file; 6.2: the one AOF file.
    let incr = [dir.join("appendonlydir"), dir.clone()]
        .iter()
        .flat_map(|d| std::fs::read_dir(d).into_iter().flatten().flatten())
        .map(|e| e.path())
        .find(|p| {
            let name = p
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .to_string();
            name.ends_with(".incr.aof") || name == "appendonly.aof"
        })
        .expect("an AOF file");
    let words = [
        "CL.POLICY",
        "SET",
        "daily",
        "FW",
        "3",
        "day",
        "TZ",
        "Test/Newzone",
    ];
    let mut resp = format!("*{}\r\n", words.len());
    for w in words {
        resp.push_str(&format!("${}\r\n{w}\r\n", w.len()));
    }
    let mut aof = std::fs::read(&incr).unwrap();
    aof.extend_from_slice(resp.as_bytes());
    std::fs::write(&incr, aof).unwrap();
    let s = Server::on(dir, &AOF_OF_COMMANDS);
    let c = &mut s.conn();
    assert_eq!(
        cmd(c, "CL.POLICY LIST"),
        Ok(Value::Array(vec![
            Value::BulkString(b"daily".to_vec()),
            Value::BulkString(b"other".to_vec())
        ]))
    );
    let why = "ERR policy 'daily' uses the time zone 'Test/Newzone', which this server cannot read: set the policy again from a server that has the zone";
    assert_eq!(err(c, "CL.LIMIT k daily"), why);
    assert_eq!(
        err(c, "CL.THROTTLEALL 1 k POLICY daily"),
        why,
        "in CL.THROTTLEALL too"
    );
    let fields = policy_fields(c, "daily");
    assert_eq!(fields.last().map(String::as_str), Some(why));
    let log = s.log();
    assert!(
        log.contains("policy 'daily' is kept but cannot be used on this server")
            && log.contains("Test/Newzone"),
        "{log}"
    );
    // It is still saved: the next RDB carries it.
    cmd(c, "DEBUG RELOAD").unwrap();
    assert_eq!(err(c, "CL.LIMIT k daily"), why);
}

#[test]
fn a_user_cannot_send_zone_rules() {
    let s = Server::start();
    let c = &mut s.conn();
    assert_eq!(
        err(c, "CL.POLICY SET p FW 3 day TZ UTC ZONEINFO x"),
        "ERR unknown option 'ZONEINFO'"
    );
}
