//! Policy trials (`CL.POLICY SET name limiter TRIAL limiter`), black-box:
//! their lifecycle (calls, counters, the trial's top offenders, PROMOTE,
//! dropping one), the trial key's name and cluster slot, and a trial
//! persisted, rewritten and replicated as policies are. That a trial
//! changes nothing enforced is `tests/module/commands/shadow.rs`'s differential test.

use crate::support::*;
use redis::Value;

fn field(c: &mut redis::Connection, name: &str, what: &str) -> Option<String> {
    policy(c, name)
        .into_iter()
        .find(|(k, _)| k == what)
        .map(|(_, v)| v)
}

fn count(c: &mut redis::Connection, name: &str, what: &str) -> i64 {
    field(c, name, what)
        .unwrap_or_else(|| panic!("no {what} in CL.POLICY GET {name}"))
        .parse()
        .unwrap()
}

fn keys(c: &mut redis::Connection) -> Vec<String> {
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(c).unwrap();
    keys.sort();
    keys
}

#[test]
fn lifecycle() {
    let s = Server::start();
    let c = &mut s.conn();
    ok(c, "CL.POLICY SET api GCRA 19 10 1 TRIAL GCRA 4 5 1");
    assert_eq!(
        policy(c, "api")
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>(),
        [
            "limiter=GCRA 19 10 1",
            "shadow=0",
            "calls=0",
            "allowed=0",
            "refused=0",
            "shadow_refused=0",
            "errors=0",
            "trial=GCRA 4 5 1",
            "trial_calls=0",
            "trial_allowed=0",
            "trial_refused=0",
            "trial_errors=0",
        ]
    );
    // The enforced limiter answers as without the trial; the trial, a
    // burst of 5, would have refused the last two.
    for i in 0..7 {
        assert_eq!(five(c, "CL.LIMIT user:7 api"), [0, 20, 19 - i, -1, 1]);
    }
    assert_eq!(keys(c), ["user:7", "{user:7}:cell-trial"]);
    // The trial key expires like any limiter's: when its bucket is full.
    assert_eq!(pttl(c, "{user:7}:cell-trial"), 1000);
    assert_eq!(count(c, "api", "allowed"), 7);
    assert_eq!(count(c, "api", "refused"), 0);
    assert_eq!(count(c, "api", "trial_calls"), 7);
    assert_eq!(count(c, "api", "trial_allowed"), 5);
    assert_eq!(count(c, "api", "trial_refused"), 2);
    // Who the trial would have refused, by the call's key; the enforced
    // summaries saw no refusal.
    assert_eq!(
        top(c, "CL.TOP POLICY api TRIAL"),
        [("user:7".into(), 2, 0, 2)]
    );
    assert!(top(c, "CL.TOP POLICY api").is_empty());
    assert!(top(c, "CL.TOP").is_empty());
    let info: String = redis::cmd("INFO")
        .arg("redis-cell_policies")
        .query(c)
        .unwrap();
    let line = "redis-cell_policy_api:calls=7,allowed=7,refused=0,shadow_refused=0,errors=0,shadow=0,trial_calls=7,trial_allowed=5,trial_refused=2,trial_errors=0";
    assert!(
        info.lines().any(|l| l.trim() == line),
        "{line} not in {info}"
    );
    // In CL.THROTTLEALL too, on the key of the policy's limiter.
    let r = cmd(c, "CL.THROTTLEALL 2 {u}:a {u}:b GCRA 1 1 1 POLICY api").unwrap();
    assert_eq!(
        r,
        cmd(c, "CL.THROTTLEALL 2 {u}:c {u}:d GCRA 1 1 1 POLICY api").unwrap()
    );
    assert!(keys(c).contains(&"{u}:b:cell-trial".to_string()));
    assert!(!keys(c).contains(&"{u}:a:cell-trial".to_string()));
    assert_eq!(count(c, "api", "trial_calls"), 9);
    // A trial key holding something else is the trial's error only.
    cmd(c, "LPUSH {user:8}:cell-trial x").unwrap();
    assert_eq!(five(c, "CL.LIMIT user:8 api"), [0, 20, 19, -1, 1]);
    assert_eq!(count(c, "api", "trial_errors"), 1);
    // RESET empties the trial's summary.
    assert_eq!(top(c, "CL.TOP POLICY api TRIAL RESET").len(), 1);
    assert!(top(c, "CL.TOP POLICY api TRIAL").is_empty());

    // PROMOTE: the trial is the limit, live, on the keys as they are.
    // user:7 owes 7 x 100 ms; under 5 per second with a burst of 5 (200 ms
    // each, 1 s of tolerance) one more fits, then none.
    ok(c, "CL.POLICY PROMOTE api");
    assert_eq!(field(c, "api", "limiter").as_deref(), Some("GCRA 4 5 1"));
    assert_eq!(field(c, "api", "trial"), None);
    assert_eq!(count(c, "api", "calls"), 10);
    assert_eq!(five(c, "CL.LIMIT user:7 api"), [0, 5, 0, -1, 1]);
    assert_eq!(five(c, "CL.LIMIT user:7 api")[0], 1);
    assert_eq!(
        err(c, "CL.POLICY PROMOTE api"),
        "ERR policy 'api' has no trial"
    );
    assert_eq!(
        err(c, "CL.POLICY PROMOTE nope"),
        "ERR unknown policy 'nope'"
    );
    assert_eq!(
        err(c, "CL.TOP POLICY api TRIAL"),
        "ERR policy 'api' has no trial"
    );

    // A new trial, then SET without TRIAL drops it: calls no longer touch
    // trial keys.
    ok(c, "CL.POLICY SET api GCRA 4 5 1 SHADOW TRIAL GCRA 1 1 1");
    assert_eq!(field(c, "api", "shadow").as_deref(), Some("1"));
    assert_eq!(field(c, "api", "trial").as_deref(), Some("GCRA 1 1 1"));
    five(c, "CL.LIMIT user:9 api");
    assert!(keys(c).contains(&"{user:9}:cell-trial".to_string()));
    ok(c, "CL.POLICY SET api GCRA 4 5 1");
    assert_eq!(field(c, "api", "trial"), None);
    five(c, "CL.LIMIT user:10 api");
    assert!(!keys(c).contains(&"{user:10}:cell-trial".to_string()));
}

#[test]
fn errors() {
    let s = Server::start();
    let c = &mut s.conn();
    for (line, want) in [
        (
            "CL.POLICY SET p GCRA 1 1 1 TRIAL FW 1 1",
            "ERR a trial has the policy's kind (GCRA, SW, SW APPROX or FW), so that PROMOTE can apply it to the policy's keys",
        ),
        (
            "CL.POLICY SET p SW 1 1 TRIAL SW 1 1 APPROX",
            "ERR a trial has the policy's kind (GCRA, SW, SW APPROX or FW), so that PROMOTE can apply it to the policy's keys",
        ),
        (
            "CL.POLICY SET p GCRA 1 1 1 TRIAL",
            "ERR a policy holds one limiter: GCRA max_burst count_per_period period, SW limit window [APPROX] or FW limit window-or-unit [ALIGN] [TZ zone]",
        ),
        (
            "CL.POLICY SET p GCRA 1 1 1 TRIAL LEAKY 1 1",
            "ERR unknown limiter: expected GCRA, SW or FW",
        ),
        (
            "CL.POLICY SET p GCRA 1 1 1 TRIAL GCRA 1 1 1 SHADOW",
            "ERR unknown option 'SHADOW'",
        ),
        (
            "CL.POLICY SET p GCRA 1 1 1 TRIAL GCRA 1 1 1 TRIAL GCRA 2 2 2",
            "ERR unknown option 'TRIAL'",
        ),
        (
            "CL.POLICY SET p GCRA 1 1 1 TRIAL GCRA 1 0 1",
            "ERR invalid count_per_period: must be 1 or greater",
        ),
        (
            "CL.POLICY PROMOTE",
            "ERR wrong number of arguments for 'cl.policy|promote' command",
        ),
        ("CL.TOP TRIAL", "ERR TRIAL needs POLICY name"),
    ] {
        assert_eq!(err(c, line), as_server_says(line, want), "{line}");
    }
    assert!(cmd(c, "CL.POLICY LIST") == Ok(Value::Array(vec![])));
    // TRIAL as a zone's value is a value, not a trial.
    assert_eq!(
        err(c, "CL.POLICY SET p FW 1 day TZ TRIAL"),
        "ERR invalid TZ: expected a time zone name such as Europe/Berlin, or an offset from -12:00 to +14:00 such as +09:00"
    );
}

/// The trial key is in the slot of the call's key, whatever the key: random
/// keys with and without hash tags, braces in every place, and binary
/// bytes, checked with `CLUSTER KEYSLOT` on a cluster-enabled node.
#[test]
fn trial_keys_share_the_calls_slot() {
    let s = Server::start();
    let c = &mut s.conn();
    let node = Server::with(Options {
        config: vec![("cluster-enabled".into(), "yes".into())],
        ..Options::default()
    });
    let n = &mut node.conn();
    ok(c, "CL.POLICY SET api FW 100 60 TRIAL FW 1 60");
    let mut rng = Rng(0x7a11);
    let alphabet: &[u8] = b"{}{}ab:\x00\xff";
    let slot = |n: &mut redis::Connection, key: &[u8]| -> i64 {
        redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(n)
            .unwrap()
    };
    let mut samples: Vec<Vec<u8>> = vec![
        b"user:7".to_vec(),
        b"{u}:sec".to_vec(),
        b"a}b".to_vec(),
        b"{}x}".to_vec(),
        b"}{".to_vec(),
        b"{a".to_vec(),
        b"".to_vec(),
    ];
    for _ in 0..300 {
        let len = rng.below(9) as usize;
        samples.push(
            (0..len)
                .map(|_| alphabet[rng.below(alphabet.len() as u64) as usize])
                .collect(),
        );
    }
    for key in samples {
        cmd(c, "FLUSHALL").unwrap();
        let r = redis::cmd("CL.LIMIT")
            .arg(&key)
            .arg("api")
            .query::<Vec<i64>>(c);
        assert_eq!(r.unwrap()[0], 0);
        let all: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(c).unwrap();
        let trial: Vec<&Vec<u8>> = all.iter().filter(|k| **k != key).collect();
        assert_eq!(trial.len(), 1, "{key:?}: {all:?}");
        let trial = trial[0];
        assert!(trial.ends_with(b":cell-trial"), "{trial:?}");
        assert_eq!(slot(n, trial), slot(n, &key), "{key:?} -> {trial:?}");
    }
    // The documented names of the common cases.
    for (key, trial) in [
        ("{u}:sec", "{u}:sec:cell-trial"),
        ("user:7", "{user:7}:cell-trial"),
    ] {
        cmd(c, "FLUSHALL").unwrap();
        five(c, &format!("CL.LIMIT {key} api"));
        assert_eq!(keys(c), {
            let mut v = vec![key.to_string(), trial.to_string()];
            v.sort();
            v
        });
    }
}

/// Policies with trials, one promoted: what every restart and replica
/// must hold.
fn set_trials(c: &mut redis::Connection) {
    ok(c, "CL.POLICY SET api GCRA 9 10 1s SHADOW TRIAL GCRA 4 5 1s");
    ok(
        c,
        "CL.POLICY SET day FW 100 day TZ +09:00 TRIAL FW 50 day TZ +09:00",
    );
    ok(c, "CL.POLICY SET win SW 5 60s TRIAL SW 2 60s");
    ok(c, "CL.POLICY PROMOTE win");
}

fn check_trials(c: &mut redis::Connection, key: Option<&str>) {
    let get = |c: &mut redis::Connection, name: &str, what: &str| field(c, name, what);
    assert_eq!(get(c, "api", "limiter").as_deref(), Some("GCRA 9 10 1s"));
    assert_eq!(get(c, "api", "shadow").as_deref(), Some("1"));
    assert_eq!(get(c, "api", "trial").as_deref(), Some("GCRA 4 5 1s"));
    assert_eq!(
        get(c, "day", "limiter").as_deref(),
        Some("FW 100 day TZ +09:00")
    );
    assert_eq!(
        get(c, "day", "trial").as_deref(),
        Some("FW 50 day TZ +09:00")
    );
    assert_eq!(get(c, "win", "limiter").as_deref(), Some("SW 2 60s"));
    assert_eq!(get(c, "win", "trial"), None);
    if let Some(key) = key {
        // The trial runs after the load.
        let before = count(c, "api", "trial_calls");
        five(c, &format!("CL.LIMIT {key} api"));
        assert_eq!(count(c, "api", "trial_calls"), before + 1);
        assert!(keys(c).contains(&format!("{{{key}}}:cell-trial")));
    }
}

#[test]
fn persisted_rewritten_and_replicated() {
    // RDB.
    let s = Server::on(fresh_dir("trials-rdb"), &[]);
    set_trials(&mut s.conn());
    cmd(&mut s.conn(), "SAVE").unwrap();
    let s = Server::on(s.stop(), &[]);
    check_trials(&mut s.conn(), Some("after-rdb"));
    drop(s);
    // AOF, then a rewrite with and without the RDB preamble.
    for preamble in ["yes", "no"] {
        let aof = [
            ("appendonly", "yes"),
            ("appendfsync", "always"),
            ("aof-use-rdb-preamble", preamble),
        ];
        let s = Server::on(fresh_dir(&format!("trials-aof-{preamble}")), &aof);
        set_trials(&mut s.conn());
        let s = Server::on(s.stop(), &aof);
        check_trials(&mut s.conn(), Some("after-aof"));
        let c = &mut s.conn();
        cmd(c, "BGREWRITEAOF").unwrap();
        eventually("rewrite done", || {
            let info: String = redis::cmd("INFO").arg("persistence").query(c).unwrap();
            info.contains("aof_rewrite_in_progress:0") && info.contains("aof_rewrite_scheduled:0")
        });
        // The rewrite's timer has written the policies after the new base.
        eventually("policies written after the rewrite", || {
            aof_commands(&s.dir)
                .iter()
                .any(|w| w[0] == "CL.POLICY" && w.iter().any(|x| x == "TRIAL"))
                || preamble == "yes"
        });
        let s = Server::on(s.stop(), &aof);
        check_trials(&mut s.conn(), Some("after-rewrite"));
    }
    // A replica: by full sync, then by replication of SET and PROMOTE; the
    // trial keys' writes reach it as effects.
    let master = Server::start();
    let m = &mut master.conn();
    ok(m, "CL.POLICY SET api GCRA 9 10 1s SHADOW TRIAL GCRA 4 5 1s");
    let replica = replica_of(&master, vec![]);
    let r = &mut replica.conn();
    ok(
        m,
        "CL.POLICY SET day FW 100 day TZ +09:00 TRIAL FW 50 day TZ +09:00",
    );
    ok(m, "CL.POLICY SET win SW 5 60s TRIAL SW 2 60s");
    ok(m, "CL.POLICY PROMOTE win");
    five(m, "CL.LIMIT user:1 api");
    five(m, "CL.LIMIT user:2 win");
    cmd(m, "SET marker 1").unwrap();
    eventually("replica caught up", || get(r, "marker").is_some());
    check_trials(r, None);
    for k in ["user:1", "{user:1}:cell-trial"] {
        let d: Value = redis::cmd("DUMP").arg(k).query(m).unwrap();
        let e: Value = redis::cmd("DUMP").arg(k).query(r).unwrap();
        assert_ne!(d, Value::Nil, "{k}");
        assert_eq!(d, e, "{k}");
    }
}
