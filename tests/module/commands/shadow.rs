//! Shadow limiters and policy trials never change enforcement, black-box
//! and differential: the same random call sequence runs on two servers
//! under one test clock, on one with shadow limiters (policies set with
//! `SHADOW`) and trials (`CL.POLICY SET ... TRIAL ...`) and on the other
//! without them. The enforcing limiters' replies (the binding index
//! included, by the limiter it names), their keys' state and the counters
//! must be identical; every shadow limiter's key, and every trial's, must
//! hold what the same limiter run alone (on the other server, with
//! `CL.LIMIT`) holds, and count what it counts.

use crate::support::*;
use redis::Value;

fn ints(c: &mut redis::Connection, line: &str) -> Vec<i64> {
    match cmd(c, line) {
        Ok(Value::Array(v)) => v
            .iter()
            .map(|x| match x {
                Value::Int(n) => *n,
                other => panic!("{line}: {other:?}"),
            })
            .collect(),
        other => panic!("{line}: {other:?}"),
    }
}

/// The counters of a policy, without its trial's.
fn counters(c: &mut redis::Connection, name: &str) -> Vec<(String, String)> {
    policy(c, name)
        .into_iter()
        .filter(|(k, _)| !k.starts_with("trial"))
        .collect()
}

/// The `redis-cell_cl_throttleall_*` lines of `INFO redis-cell`.
fn throttleall_stats(c: &mut redis::Connection) -> Vec<String> {
    let info: String = redis::cmd("INFO").arg("redis-cell").query(c).unwrap();
    info.lines()
        .filter(|l| l.starts_with("redis-cell_cl_throttleall_"))
        .map(str::to_string)
        .collect()
}

fn keys(c: &mut redis::Connection) -> Vec<String> {
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(c).unwrap();
    keys.sort();
    keys
}

fn dump(c: &mut redis::Connection, key: &str) -> Value {
    redis::cmd("DUMP").arg(key).query(c).unwrap()
}

/// The enforcing policies: (name, limiter, trial limiter of the same kind).
const ENFORCED: [(&str, &str, &str); 4] = [
    ("e0", "GCRA 3 2 1s", "GCRA 1 1 1s"),
    ("e1", "SW 3 2s", "SW 1 2s"),
    ("e2", "SW 3 2s APPROX", "SW 2 1s APPROX"),
    ("e3", "FW 4 2s", "FW 2 2s ALIGN"),
];

/// The shadow policies (the same on both servers).
const SHADOWS: [(&str, &str); 4] = [
    ("s0", "GCRA 1 2 1s"),
    ("s1", "FW 1 1s"),
    ("s2", "SW 1 1s"),
    ("s3", "SW 2 1s APPROX"),
];

/// A limiter of a call: the key's name (after the user's tag) and its
/// words.
struct Part {
    key: String,
    words: String,
    /// The enforcing policy (with its trial) it names, if any.
    enforced: Option<usize>,
    /// The shadow policy it names, if any.
    shadow: Option<usize>,
}

#[test]
fn shadow_and_trials_change_nothing_enforced() {
    // `with` has the shadow limiters and the trials; `without` has neither,
    // and runs each shadow limiter and trial alone with CL.LIMIT instead.
    let with = Server::start();
    let without = Server::start();
    let w = &mut with.conn();
    let o = &mut without.conn();
    for (name, l, t) in ENFORCED {
        ok(w, &format!("CL.POLICY SET {name} {l} TRIAL {t}"));
        ok(o, &format!("CL.POLICY SET {name} {l}"));
        // The trial, alone: an enforcing policy of its own.
        ok(o, &format!("CL.POLICY SET t{} {t}", &name[1..]));
    }
    for (name, l) in SHADOWS {
        ok(w, &format!("CL.POLICY SET {name} {l} SHADOW"));
        ok(o, &format!("CL.POLICY SET {name} {l} SHADOW"));
    }
    let mut rng = Rng(0x5eed_0021);
    let mut now = T0;
    let mut shadow_refusals = 0;
    let mut trial_refusals = 0;
    let mut enforced_refusals = 0;
    for step in 0..300 {
        let user = format!("{{u{}}}", rng.below(3));
        let q = rng.below(3);
        let ms = if rng.below(2) == 0 { " MS" } else { "" };
        if rng.below(5) == 0 {
            // CL.LIMIT of a policy with a trial.
            let j = rng.below(4) as usize;
            let key = format!("{user}:e{j}");
            let line = format!("CL.LIMIT {key} e{j} {q}{ms}");
            let a = ints(w, &line);
            let b = ints(o, &line);
            assert_eq!(a, b, "step {step}: {line}");
            ints(o, &format!("CL.LIMIT {key}:cell-trial t{j} {q}"));
        } else {
            // CL.THROTTLEALL: 1 to 3 enforcing limiters (policies or
            // arguments), 0 to 2 shadow ones, in random places.
            let mut parts: Vec<Part> = Vec::new();
            let mut used = [false; 4];
            for _ in 0..1 + rng.below(3) {
                let j = rng.below(5) as usize;
                if j == 4 {
                    if parts.iter().any(|p| p.key == "g") {
                        continue;
                    }
                    parts.push(Part {
                        key: "g".into(),
                        words: "GCRA 2 3 1s".into(),
                        enforced: None,
                        shadow: None,
                    });
                } else if !used[j] {
                    used[j] = true;
                    parts.push(Part {
                        key: format!("e{j}"),
                        words: format!("POLICY e{j}"),
                        enforced: Some(j),
                        shadow: None,
                    });
                }
            }
            let enforcing: Vec<String> = parts.iter().map(|p| p.key.clone()).collect();
            let mut full: Vec<Part> = parts
                .iter()
                .map(|p| Part {
                    key: p.key.clone(),
                    words: p.words.clone(),
                    enforced: p.enforced,
                    shadow: None,
                })
                .collect();
            let mut shadow_used = [false; 4];
            for _ in 0..rng.below(3) {
                let k = rng.below(4) as usize;
                if shadow_used[k] {
                    continue;
                }
                shadow_used[k] = true;
                let at = rng.below(full.len() as u64 + 1) as usize;
                full.insert(
                    at,
                    Part {
                        key: format!("s{k}"),
                        words: format!("POLICY s{k}"),
                        enforced: None,
                        shadow: Some(k),
                    },
                );
            }
            let call_shadow = if rng.below(6) == 0 { " SHADOW" } else { "" };
            let line = |parts: &[Part]| {
                let keys: Vec<String> = parts.iter().map(|p| format!("{user}:{}", p.key)).collect();
                let words: Vec<&str> = parts.iter().map(|p| p.words.as_str()).collect();
                format!(
                    "CL.THROTTLEALL {} {} {} QUANTITY {q}{ms}{call_shadow}",
                    parts.len(),
                    keys.join(" "),
                    words.join(" ")
                )
            };
            let (line_w, line_o) = (line(&full), line(&parts));
            let a = ints(w, &line_w);
            let b = ints(o, &line_o);
            assert_eq!(a.len(), 6, "{line_w}");
            assert_eq!(a[..5], b[..5], "step {step}: {line_w} vs {line_o}");
            // The binding index names the same limiter.
            let named = |parts: &[Part], i: i64| parts[(i - 1) as usize].key.clone();
            assert_eq!(
                named(&full, a[5]),
                named(&parts, b[5]),
                "step {step}: {line_w} vs {line_o}"
            );
            assert!(enforcing.contains(&named(&full, a[5])));
            if a[0] == 1 {
                enforced_refusals += 1;
            }
            // Each shadow limiter and trial alone, at the same instant.
            for p in &full {
                if let Some(k) = p.shadow {
                    let r = ints(o, &format!("CL.LIMIT {user}:s{k} s{k} {q}"));
                    // Shadow mode answers a refusal as allowed; the
                    // counters tell.
                    assert_eq!(r[0], 0);
                }
                if let Some(j) = p.enforced {
                    let r = ints(o, &format!("CL.LIMIT {user}:e{j}:cell-trial t{j} {q}"));
                    trial_refusals += r[0];
                }
            }
        }
        // The same instant on both, stepped by up to 0.7 s; Valkey 9
        // needs a moment to see a step.
        now += rng.below(700) as i64 * MS;
        with.set_time(now);
        without.set_time(now);
        std::thread::sleep(std::time::Duration::from_millis(3));
    }
    // The same keys, each the same value and expiry: the enforced ones as
    // without shadow limiters, the shadow and trial ones as run alone.
    let names = keys(w);
    assert_eq!(names, keys(o));
    assert!(names.iter().any(|k| k.ends_with(":cell-trial")));
    assert!(names.iter().any(|k| k.ends_with(":s2")));
    for k in &names {
        assert_eq!(dump(w, k), dump(o, k), "{k}");
        assert_eq!(expire_time_ms(w, k), expire_time_ms(o, k), "{k}");
    }
    // The same counters: the enforcing policies' and CL.THROTTLEALL's own;
    // each shadow policy's as when run alone; each trial's as its limiter
    // enforced alone.
    for (name, _, _) in ENFORCED {
        assert_eq!(counters(w, name), counters(o, name), "{name}");
        let alone = format!("t{}", &name[1..]);
        assert_eq!(
            policy_field(w, name, "trial_calls"),
            policy_field(o, &alone, "calls")
        );
        assert_eq!(
            policy_field(w, name, "trial_allowed"),
            policy_field(o, &alone, "allowed")
        );
        assert_eq!(
            policy_field(w, name, "trial_refused"),
            policy_field(o, &alone, "refused")
        );
        shadow_refusals += policy_field(w, name, "trial_refused")
            .parse::<i64>()
            .unwrap();
    }
    for (name, _) in SHADOWS {
        assert_eq!(counters(w, name), counters(o, name), "{name}");
    }
    assert_eq!(throttleall_stats(w), throttleall_stats(o));
    // The sequence did exercise refusals of every sort.
    assert!(
        enforced_refusals > 10,
        "{enforced_refusals} enforced refusals"
    );
    assert!(trial_refusals > 10, "{trial_refusals} trial refusals");
    assert!(
        shadow_refusals > 10,
        "{shadow_refusals} trial refusals counted"
    );
    let shadowed: i64 = SHADOWS
        .iter()
        .map(|(n, _)| policy_field(w, n, "shadow_refused").parse::<i64>().unwrap())
        .sum();
    assert!(shadowed > 10, "{shadowed} shadow refusals");
}

/// A shadow limiter's key of the wrong type is that limiter's error only:
/// the enforcing limiters decide, write and answer as without it; a call
/// of shadow limiters only fails when every one of them fails.
#[test]
fn a_shadow_limiters_error_is_its_own() {
    let s = Server::start();
    let c = &mut s.conn();
    ok(c, "CL.POLICY SET dry GCRA 0 1 60s SHADOW");
    ok(c, "CL.POLICY SET api FW 5 60s");
    cmd(c, "LPUSH {u}:bad x").unwrap();
    let line = "CL.THROTTLEALL 2 {u}:bad {u}:n POLICY dry POLICY api";
    assert_eq!(ints(c, line), [0, 5, 4, -1, 60, 2]);
    assert_eq!(get(c, "{u}:n").as_deref(), Some("1"));
    assert_eq!(policy_field(c, "dry", "errors"), "1");
    assert_eq!(policy_field(c, "api", "allowed"), "1");
    // Shadow limiters only: one that decides answers; none, the error.
    assert_eq!(
        ints(c, "CL.THROTTLEALL 2 {u}:bad {u}:ok POLICY dry POLICY dry"),
        [0, 1, 0, -1, 60, 2]
    );
    assert_eq!(
        err(c, "CL.THROTTLEALL 1 {u}:bad POLICY dry MS"),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    assert_eq!(policy_field(c, "dry", "errors"), "3");
    // An enforcing limiter's error fails the call, as without shadow ones.
    assert_eq!(
        err(c, "CL.THROTTLEALL 2 {u}:ok {u}:bad POLICY dry POLICY api"),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    assert_eq!(policy_field(c, "api", "errors"), "1");
}
