//! Named policies (`CL.POLICY`, `CL.LIMIT`, `POLICY` in `CL.THROTTLEALL`),
//! shadow mode and the top offenders (`CL.TOP`), black-box: their
//! lifecycle, a live change of each kind, persistence, replicas and
//! failover, shadow against enforced runs, and the summary's accuracy.

use crate::support::*;
use redis::Value;

fn dump(c: &mut redis::Connection, key: &str) -> Value {
    redis::cmd("DUMP").arg(key).query(c).unwrap()
}

#[test]
fn lifecycle() {
    let s = Server::start();
    let c = &mut s.conn();
    assert!(policy_list(c).is_empty());
    ok(c, "CL.POLICY SET api-sec GCRA 9 10 1s");
    ok(c, "CL.POLICY SET api.day fw 1000 day SHADOW");
    ok(c, "cl.policy set search SW 5 60 APPROX");
    assert_eq!(policy_list(c), ["api-sec", "api.day", "search"]);
    assert_eq!(
        policy(c, "api.day"),
        [
            ("limiter", "fw 1000 day"),
            ("shadow", "1"),
            ("calls", "0"),
            ("allowed", "0"),
            ("refused", "0"),
            ("shadow_refused", "0"),
            ("errors", "0"),
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    assert_eq!(policy_field(c, "search", "limiter"), "SW 5 60 APPROX");
    // Replacing keeps the counters; a new limiter of the same kind.
    five(c, "CL.LIMIT k1 api-sec");
    ok(c, "CL.POLICY SET api-sec GCRA 19 20 1s");
    assert_eq!(policy_field(c, "api-sec", "limiter"), "GCRA 19 20 1s");
    assert_eq!(policy_counter(c, "api-sec", "calls"), 1);
    assert_eq!(five(c, "CL.LIMIT k1 api-sec")[1], 20);
    // SHADOW can be dropped, and given among the limiter's options.
    ok(c, "CL.POLICY SET api.day FW 1000 day");
    assert_eq!(policy_field(c, "api.day", "shadow"), "0");
    ok(c, "CL.POLICY SET search SW 5 60 shadow APPROX");
    assert_eq!(policy_field(c, "search", "shadow"), "1");
    assert_eq!(policy_field(c, "search", "limiter"), "SW 5 60 APPROX");
    assert_eq!(int(c, "CL.POLICY DEL search"), 1);
    assert_eq!(int(c, "CL.POLICY DEL search"), 0);
    assert_eq!(policy_list(c), ["api-sec", "api.day"]);
    assert_eq!(
        err(c, "CL.POLICY GET search"),
        "ERR unknown policy 'search'"
    );
}

#[test]
fn an_unknown_policy_writes_nothing() {
    let s = Server::start();
    let c = &mut s.conn();
    assert_eq!(err(c, "CL.LIMIT k nope"), "ERR unknown policy 'nope'");
    assert_eq!(
        err(c, "CL.THROTTLEALL 2 a b GCRA 1 1 1 POLICY nope"),
        "ERR unknown policy 'nope'"
    );
    assert_eq!(err(c, "CL.TOP POLICY nope"), "ERR unknown policy 'nope'");
    assert_eq!(dbsize(c), 0);
    // Names are shown safely.
    let shown = run(c, &[b"CL.LIMIT", b"k", b"a\r\n\xffb"]).unwrap_err();
    assert_eq!(shown, "ERR unknown policy 'a???b'");
}

#[test]
fn bad_input() {
    let s = Server::start();
    let c = &mut s.conn();
    let bad_name = "ERR invalid policy name: 1 to 64 bytes of letters, digits, '_', '.' and '-'";
    for name in [&b"a:b"[..], b"a b", b"", &[b'x'; 65], b"caf\xc3\xa9", b"\0"] {
        let got = run(c, &[b"CL.POLICY", b"SET", name, b"GCRA", b"1", b"1", b"1"]);
        assert_eq!(got.unwrap_err(), bad_name, "{name:?}");
    }
    ok(c, &format!("CL.POLICY SET {} GCRA 1 1 1", "x".repeat(64)));
    let words = "ERR a policy holds one limiter: GCRA max_burst count_per_period period, SW limit window [APPROX] or FW limit window-or-unit [ALIGN] [TZ zone]";
    assert_eq!(err(c, "CL.POLICY SET p GCRA 1 1"), words);
    assert_eq!(
        err(c, "CL.POLICY SET p LEAKY 1 1"),
        "ERR unknown limiter: expected GCRA, SW or FW"
    );
    assert_eq!(
        err(c, "CL.POLICY SET p GCRA 1 1 1 QUANTITY 3"),
        "ERR unknown option 'QUANTITY'"
    );
    assert_eq!(
        err(c, "CL.POLICY SET p SW 1 1 SHADOW SHADOW"),
        "ERR SHADOW given twice"
    );
    assert_eq!(
        err(c, "CL.POLICY SET p GCRA -1 1 1"),
        "ERR invalid max_burst: must be 0 or greater"
    );
    assert_eq!(
        err(c, "CL.POLICY SET p FW 1 60 TZ UTC"),
        "ERR TZ needs a calendar window: minute, hour, day, week, month or year"
    );
    assert_eq!(
        err(c, "CL.POLICY FROB p"),
        "ERR unknown subcommand 'FROB'. Try CL.POLICY HELP."
    );
    for (line, name) in [
        ("CL.POLICY SET p", "cl.policy|set"),
        ("CL.POLICY GET", "cl.policy|get"),
        ("CL.POLICY DEL a b", "cl.policy|del"),
        ("CL.POLICY LIST x", "cl.policy|list"),
        ("CL.POLICY HELP x", "cl.policy|help"),
    ] {
        assert_eq!(
            err(c, line),
            format!("ERR wrong number of arguments for '{name}' command"),
            "{line}"
        );
    }
    for line in ["CL.POLICY", "CL.LIMIT k"] {
        assert_eq!(
            err(c, line),
            as_server_says(
                line,
                &format!(
                    "ERR wrong number of arguments for '{}' command",
                    line.split(' ').next().unwrap().to_lowercase()
                )
            ),
            "{line}"
        );
    }
    ok(c, "CL.POLICY SET p GCRA 1 1 1");
    assert_eq!(
        err(c, "CL.POLICY SET p FW 1 1"),
        "ERR a policy keeps its kind (GCRA, SW, SW APPROX or FW), which its keys hold: DEL it first, or use a new name"
    );
    assert_eq!(
        err(c, "CL.POLICY SET p SW 1 1"),
        err(c, "CL.POLICY SET p FW 1 1")
    );
    assert_eq!(
        err(c, "CL.LIMIT k p 1.5"),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err(c, "CL.LIMIT k p -1"),
        "ERR invalid quantity: must be 0 or greater"
    );
    assert_eq!(err(c, "CL.LIMIT k p APPROX"), "ERR unknown option 'APPROX'");
    assert_eq!(
        err(c, "CL.TOP COUNT 0"),
        "ERR invalid COUNT: must be 1 or greater"
    );
    assert_eq!(
        err(c, "CL.TOP COUNT x"),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(err(c, "CL.TOP COUNT"), "ERR COUNT needs a value");
    assert_eq!(err(c, "CL.TOP FOO"), "ERR unknown option 'FOO'");
    // A huge COUNT answers what there is.
    assert!(top(c, "CL.TOP COUNT 9223372036854775807").is_empty());
    // The key's type is checked after the policy: an error, counted.
    cmd(c, "HSET h f v").unwrap();
    assert!(err(c, "CL.LIMIT h p").starts_with("WRONGTYPE"));
    assert_eq!(policy_counter(c, "p", "errors"), 1);
    assert_eq!(policy_counter(c, "p", "calls"), 1);
    ping(c);
}

#[test]
fn at_most_ten_thousand_policies() {
    let s = Server::start();
    let c = &mut s.conn();
    let mut pipe = redis::pipe();
    for i in 0..10_000 {
        pipe.cmd("CL.POLICY")
            .arg("SET")
            .arg(format!("p{i}"))
            .arg("GCRA")
            .arg(1)
            .arg(1)
            .arg(1)
            .ignore();
    }
    pipe.query::<()>(c).unwrap();
    assert_eq!(
        err(c, "CL.POLICY SET one-more GCRA 1 1 1"),
        "ERR too many policies: at most 10000; delete one first"
    );
    // Replacing one is still allowed.
    ok(c, "CL.POLICY SET p7 GCRA 2 1 1");
    assert_eq!(int(c, "CL.POLICY DEL p7"), 1);
    ok(c, "CL.POLICY SET one-more GCRA 1 1 1");
}

/// A policy decides, writes and answers exactly as its limiter given as
/// arguments, for every kind, single and in `CL.THROTTLEALL`.
#[test]
fn a_policy_is_its_limiter() {
    let s = Server::start();
    let c = &mut s.conn();
    let kinds = [
        ("GCRA 2 3 10s", "CL.THROTTLE {k} 2 3 10s", "GCRA 2 3 10s"),
        ("SW 3 10s", "SW.ALLOW {k} 3 10s", "SW 3 10s"),
        (
            "SW 3 10s APPROX",
            "SW.ALLOW {k} 3 10s APPROX",
            "SW 3 10s APPROX",
        ),
        (
            "FW 3 10s ALIGN",
            "FW.INCR {k} 3 10s ALIGN",
            "FW 3 10s ALIGN",
        ),
        ("FW 3 day", "FW.INCR {k} 3 day", "FW 3 day"),
    ];
    for (i, (limiter, direct, _)) in kinds.iter().enumerate() {
        ok(c, &format!("CL.POLICY SET p{i} {limiter}"));
        let mut now = T0;
        for step in 0..12 {
            let q = [1, 2, 0, 1][step % 4];
            let by_policy = five(c, &format!("CL.LIMIT pol{i} p{i} {q} MS"));
            let by_args = five(
                c,
                &format!("{} {q} MS", direct.replace("{k}", &format!("arg{i}"))),
            );
            assert_eq!(by_policy, by_args, "{limiter} step {step}");
            assert_eq!(dump(c, &format!("pol{i}")), dump(c, &format!("arg{i}")));
            assert_eq!(pttl(c, &format!("pol{i}")), pttl(c, &format!("arg{i}")));
            now += 1_700 * MS;
            s.set_time(now);
            std::thread::sleep(std::time::Duration::from_millis(3));
        }
    }
    // In CL.THROTTLEALL: POLICY stands for the limiter.
    for round in 0..6 {
        let a: Vec<Value> = match cmd(
            c,
            "CL.THROTTLEALL 3 {u}:a {u}:b {u}:c POLICY p0 POLICY p1 POLICY p4 MS",
        ) {
            Ok(Value::Array(v)) => v,
            other => panic!("{other:?}"),
        };
        let b: Vec<Value> = match cmd(
            c,
            &format!(
                "CL.THROTTLEALL 3 {{v}}:a {{v}}:b {{v}}:c {} {} {} MS",
                kinds[0].2, kinds[1].2, kinds[4].2
            ),
        ) {
            Ok(Value::Array(v)) => v,
            other => panic!("{other:?}"),
        };
        assert_eq!(a, b, "round {round}");
        for k in ["a", "b", "c"] {
            assert_eq!(
                dump(c, &format!("{{u}}:{k}")),
                dump(c, &format!("{{v}}:{k}"))
            );
        }
    }
    // Mixed: a policy beside a limiter given as arguments, with QUANTITY.
    let mixed = cmd(c, "CL.THROTTLEALL 2 m1 m2 POLICY p0 SW 5 10s QUANTITY 2").unwrap();
    let plain = cmd(c, "CL.THROTTLEALL 2 n1 n2 GCRA 2 3 10s SW 5 10s QUANTITY 2").unwrap();
    assert_eq!(mixed, plain);
}

fn step(s: &Server, now: &mut i64, by: i64) {
    *now += by;
    s.set_time(*now);
    std::thread::sleep(std::time::Duration::from_millis(3));
}

/// `SET` applies from the next call, on every key, without touching the
/// state: GCRA keeps its TAT, a counter its count and window end, an exact
/// log its entries; an APPROX counter under a new window starts over.
#[test]
fn live_change_of_each_kind() {
    let s = Server::start();
    let c = &mut s.conn();
    let mut now = T0;

    // GCRA: one request per 10 s, burst 1 (limit 2). Two requests fill it.
    ok(c, "CL.POLICY SET g GCRA 1 1 10s");
    five(c, "CL.LIMIT g1 g");
    five(c, "CL.LIMIT g1 g");
    assert_eq!(five(c, "CL.LIMIT g1 g"), [1, 2, 0, 10, 20]);
    let tat = get(c, "g1");
    // A larger burst admits at once, from the same TAT (20 s ahead).
    ok(c, "CL.POLICY SET g GCRA 3 1 10s");
    assert_eq!(get(c, "g1"), tat, "SET must not touch keys");
    assert_eq!(five(c, "CL.LIMIT g1 g"), [0, 4, 1, -1, 30]);
    // A faster rate with the same burst: the TAT, 30 s ahead, is now over
    // the tolerance (4 x 2 s = 8 s): refused until it is 6 s ahead.
    ok(c, "CL.POLICY SET g GCRA 3 5 10s");
    assert_eq!(five(c, "CL.LIMIT g1 g MS"), [1, 4, 0, 24_000, 30_000]);

    // FW: a limit of 2 per minute, used up; the count and the window end
    // stay, the new limit applies to them.
    ok(c, "CL.POLICY SET f FW 2 60s");
    five(c, "CL.LIMIT f1 f");
    step(&s, &mut now, 10 * SEC);
    five(c, "CL.LIMIT f1 f");
    assert_eq!(five(c, "CL.LIMIT f1 f"), [1, 2, 0, 50, 50]);
    ok(c, "CL.POLICY SET f FW 5 10s");
    assert_eq!(five(c, "CL.LIMIT f1 f"), [0, 5, 2, -1, 50]);
    assert_eq!(get(c, "f1").as_deref(), Some("3"));
    // The window of 10 s applies from the next window on.
    step(&s, &mut now, 50 * SEC);
    assert_eq!(five(c, "CL.LIMIT f1 f"), [0, 5, 4, -1, 10]);

    // SW exact: entries at 0, 10 and 20 s in a window of 60 s.
    ok(c, "CL.POLICY SET w SW 3 60s");
    for _ in 0..3 {
        five(c, "CL.LIMIT w1 w");
        step(&s, &mut now, 10 * SEC);
    }
    assert_eq!(five(c, "CL.LIMIT w1 w 0"), [0, 3, 0, -1, 50]);
    // A window of 15 s, at 30 s: only the entry at 20 s is in it.
    ok(c, "CL.POLICY SET w SW 3 15s");
    assert_eq!(five(c, "CL.LIMIT w1 w 0"), [0, 3, 2, -1, 5]);
    // Back to 60 s: the log still holds all three.
    ok(c, "CL.POLICY SET w SW 3 60s");
    assert_eq!(five(c, "CL.LIMIT w1 w 0"), [0, 3, 0, -1, 50]);
    // A larger limit admits at once.
    ok(c, "CL.POLICY SET w SW 4 60s");
    assert_eq!(five(c, "CL.LIMIT w1 w"), [0, 4, 0, -1, 60]);

    // SW APPROX: a new limit applies to the counts; a new window starts
    // them over.
    ok(c, "CL.POLICY SET a SW 2 60s APPROX");
    five(c, "CL.LIMIT a1 a");
    five(c, "CL.LIMIT a1 a");
    assert_eq!(five(c, "CL.LIMIT a1 a")[0], 1);
    ok(c, "CL.POLICY SET a SW 3 60s APPROX");
    assert_eq!(five(c, "CL.LIMIT a1 a")[..3], [0, 3, 0]);
    ok(c, "CL.POLICY SET a SW 3 30s APPROX");
    assert_eq!(five(c, "CL.LIMIT a1 a")[..3], [0, 3, 2]);
}

/// Shadow mode writes what enforcing writes and answers allowed: the same
/// workload, enforced and in shadow mode, leaves the same state, and the
/// shadow run counts as shadow refusals what the enforced one refused.
#[test]
fn shadow_against_enforced() {
    let enforced = Server::start();
    let shadow = Server::start();
    let e = &mut enforced.conn();
    let h = &mut shadow.conn();
    let limiters = ["GCRA 1 1 10s", "SW 2 10s", "SW 2 10s APPROX", "FW 2 10s"];
    for (i, l) in limiters.iter().enumerate() {
        ok(e, &format!("CL.POLICY SET p{i} {l}"));
        // Half the policies in shadow mode by their own flag, the other
        // half by the call's.
        let flag = if i.is_multiple_of(2) { " SHADOW" } else { "" };
        ok(h, &format!("CL.POLICY SET p{i} {l}{flag}"));
    }
    let mut rng = Rng(42);
    let mut now = T0;
    let mut refused = [0i64; 4];
    for _ in 0..400 {
        let i = rng.below(4) as usize;
        let key = format!("k{}", rng.below(3));
        let q = rng.below(3);
        let line = format!("CL.LIMIT {key}:{i} p{i} {q} MS");
        let shadow_line = if i.is_multiple_of(2) {
            line.clone()
        } else {
            format!("{line} SHADOW")
        };
        let a = five(e, &line);
        let b = five(h, &shadow_line);
        if a[0] == 1 {
            refused[i] += 1;
            assert_eq!(b, [0, a[1], a[2], -1, a[4]], "{line}");
        } else {
            assert_eq!(a, b, "{line}");
        }
        // The plain commands' SHADOW flag too.
        let direct = [
            "CL.THROTTLE g{k} 1 1 10s",
            "SW.ALLOW s{k} 1 10s",
            "FW.INCR f{k} 1 10s",
        ];
        let d = direct[(rng.below(3)) as usize].replace("{k}", &key);
        let a = five(e, &d);
        let b = five(h, &format!("{d} SHADOW"));
        assert_eq!(b, [0, a[1], a[2], if a[0] == 1 { -1 } else { a[3] }, a[4]]);
        let t = rng.below(1_000) as i64 * MS;
        now += t;
        enforced.set_time(now);
        shadow.set_time(now);
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    // Key by key (a whole-dataset digest would also see keys expired but
    // not yet deleted, which differ between two servers).
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(e).unwrap();
    keys.sort();
    let mut shadow_keys: Vec<String> = redis::cmd("KEYS").arg("*").query(h).unwrap();
    shadow_keys.sort();
    assert_eq!(keys, shadow_keys);
    for k in &keys {
        assert_eq!(dump(e, k), dump(h, k), "{k}");
        assert_eq!(pttl(e, k), pttl(h, k), "{k}");
    }
    for (i, r) in refused.iter().enumerate() {
        assert!(*r > 5, "p{i}: only {r} refusals");
        let name = format!("p{i}");
        assert_eq!(policy_counter(e, &name, "refused"), *r);
        assert_eq!(policy_counter(h, &name, "shadow_refused"), *r);
        assert_eq!(policy_counter(h, &name, "refused"), 0);
        assert_eq!(
            policy_counter(e, &name, "allowed"),
            policy_counter(h, &name, "allowed")
        );
    }
    // Turning enforcement on needs nothing else: the next refusal refuses.
    ok(h, "CL.POLICY SET p0 GCRA 1 1 10s");
    let before = policy_counter(h, "p0", "refused");
    while five(h, "CL.LIMIT hot p0")[0] == 0 {}
    assert_eq!(policy_counter(h, "p0", "refused"), before + 1);
}

/// In CL.THROTTLEALL, a shadow limiter decides apart: its refusal neither
/// binds nor stops the enforcing limiters from counting, and it is charged
/// as if it were alone.
#[test]
fn shadow_in_throttleall() {
    let s = Server::start();
    let c = &mut s.conn();
    ok(c, "CL.POLICY SET tight FW 1 60s SHADOW");
    ok(c, "CL.POLICY SET loose FW 10 60s");
    let r = |c: &mut redis::Connection, line: &str| -> Vec<i64> {
        match cmd(c, line) {
            Ok(Value::Array(v)) => v.iter().map(|x| text(x).parse().unwrap()).collect(),
            other => panic!("{other:?}"),
        }
    };
    let line = "CL.THROTTLEALL 2 a b POLICY tight POLICY loose";
    // The binding limiter is the enforcing one, by its place in the call.
    assert_eq!(r(c, line), [0, 10, 9, -1, 60, 2]);
    // `tight` refuses: `loose` is charged as without it.
    assert_eq!(r(c, line), [0, 10, 8, -1, 60, 2]);
    assert_eq!(get(c, "a").as_deref(), Some("1"));
    assert_eq!(get(c, "b").as_deref(), Some("2"));
    assert_eq!(policy_counter(c, "tight", "shadow_refused"), 1);
    assert_eq!(policy_counter(c, "tight", "allowed"), 1);
    assert_eq!(policy_counter(c, "loose", "allowed"), 2);
    // An enforcing refusal binds.
    ok(c, "CL.POLICY SET loose FW 2 60s");
    assert_eq!(r(c, line), [1, 2, 0, 60, 60, 2]);
    // The call's SHADOW answers that refusal as allowed, writing the same.
    assert_eq!(r(c, &format!("{line} SHADOW")), [0, 2, 0, -1, 60, 2]);
    assert_eq!(get(c, "b").as_deref(), Some("2"));
    // Only shadow limiters: each as if alone, the binding one answered.
    assert_eq!(
        r(c, "CL.THROTTLEALL 2 a e POLICY tight POLICY tight"),
        [0, 1, 0, -1, 60, 1]
    );
    assert_eq!(get(c, "e").as_deref(), Some("1"));
    let info: String = redis::cmd("INFO").arg("redis-cell").query(c).unwrap();
    assert!(
        info.contains("redis-cell_cl_throttleall_shadow_refused:2"),
        "{info}"
    );
    assert!(
        info.contains("redis-cell_cl_throttleall_limited:1"),
        "{info}"
    );
}

#[test]
fn counters_in_info() {
    let s = Server::start();
    let c = &mut s.conn();
    ok(c, "CL.POLICY SET api GCRA 0 1 60s");
    ok(c, "CL.POLICY SET dry GCRA 0 1 60s SHADOW");
    five(c, "CL.LIMIT k api");
    five(c, "CL.LIMIT k api");
    five(c, "CL.LIMIT j dry");
    five(c, "CL.LIMIT j dry");
    let info: String = redis::cmd("INFO")
        .arg("redis-cell_policies")
        .query(c)
        .unwrap();
    for line in [
        "redis-cell_top_capacity:1024",
        "redis-cell_policies:2",
        "redis-cell_policy_api:calls=2,allowed=1,refused=1,shadow_refused=0,errors=0,shadow=0",
        "redis-cell_policy_dry:calls=2,allowed=1,refused=0,shadow_refused=1,errors=0,shadow=1",
    ] {
        assert!(
            info.lines().any(|l| l.trim() == line),
            "{line} not in {info}"
        );
    }
    let all: String = redis::cmd("INFO").arg("redis-cell").query(c).unwrap();
    assert!(all.contains("redis-cell_policy_api:"), "{all}");
}

/// A Zipf-like stream of refusals over many keys: the true top 10 are
/// found, each count within its reported bound.
#[test]
fn top_offenders() {
    let s = Server::with(Options {
        module_args: vec!["top-capacity".into(), "64".into()],
        ..Options::default()
    });
    let c = &mut s.conn();
    ok(c, "CL.POLICY SET none GCRA 0 1 1d");
    ok(c, "CL.POLICY SET dry GCRA 0 1 1d SHADOW");
    // Key r (rank 1..=2000) is refused about 20000 / r^1.1 times; each
    // key's first call is allowed.
    let mut truth = std::collections::HashMap::<String, i64>::new();
    let mut rng = Rng(7);
    let weights: Vec<f64> = (1..=2000).map(|r| 1.0 / (r as f64).powf(1.1)).collect();
    let total: f64 = weights.iter().sum();
    let mut pipe = redis::pipe();
    for _ in 0..30_000 {
        let mut x = (rng.below(1 << 40) as f64 / (1u64 << 40) as f64) * total;
        let mut rank = 0;
        while rank + 1 < weights.len() && x > weights[rank] {
            x -= weights[rank];
            rank += 1;
        }
        let key = format!("user:{}", rank * 7919 % 2000);
        let policy = if rank % 5 == 0 { "dry" } else { "none" };
        pipe.cmd("CL.LIMIT").arg(&key).arg(policy).ignore();
        *truth.entry(key).or_default() += 1;
    }
    pipe.query::<()>(c).unwrap();
    // Refusals: every call but each key's first.
    let mut ranked: Vec<(i64, String)> = truth.iter().map(|(k, n)| (n - 1, k.clone())).collect();
    ranked.sort_by(|a, b| b.cmp(a));
    let got = top(c, "CL.TOP COUNT 10");
    assert_eq!(got.len(), 10);
    for (key, count, error, shadow) in &got {
        let real = truth[key] - 1;
        assert!(
            *count >= real && count - error <= real,
            "{key}: {count}-{error} vs {real}"
        );
        assert!(*shadow <= *count);
    }
    let found = ranked[..10]
        .iter()
        .filter(|(_, k)| got.iter().any(|g| &g.0 == k))
        .count();
    assert!(
        found >= 9,
        "found {found} of the top 10: {got:?} vs {:?}",
        &ranked[..10]
    );
    // Shadow refusals are marked: rank 0 goes through `dry`.
    let first = got.iter().find(|g| g.0 == "user:0").expect("the top key");
    assert_eq!(first.3, first.1, "all of user:0's refusals are shadow ones");
    // Per policy, and RESET.
    let dry = top(c, "CL.TOP POLICY dry COUNT 3 RESET");
    assert_eq!(dry[0].0, "user:0");
    assert!(top(c, "CL.TOP POLICY dry").is_empty());
    assert_eq!(top(c, "CL.TOP COUNT 1")[0].0, "user:0");
    // The capacity bounds what is tracked.
    assert_eq!(top(c, "CL.TOP COUNT 1000").len(), 64);
    assert!(top(c, "CL.TOP RESET").len() == 10);
    assert!(top(c, "CL.TOP").is_empty());
}

#[test]
fn top_capacity_is_configurable() {
    let s = Server::with(Options {
        module_args: vec!["top-capacity".into(), "3".into()],
        ..Options::default()
    });
    let c = &mut s.conn();
    for k in 0..10 {
        five(c, &format!("FW.INCR k{k} 0 60s"));
    }
    assert_eq!(top(c, "CL.TOP COUNT 100").len(), 3);
    if server_version().has_7_0() {
        let got: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("redis-cell.top-capacity")
            .query(c)
            .unwrap();
        assert_eq!(got, ["redis-cell.top-capacity", "3"]);
        ok(c, "CONFIG SET redis-cell.top-capacity 5");
        // A new capacity starts the summaries over.
        assert!(top(c, "CL.TOP").is_empty());
        for k in 0..10 {
            five(c, &format!("FW.INCR k{k} 0 60s"));
        }
        assert_eq!(top(c, "CL.TOP COUNT 100").len(), 5);
        assert!(err(c, "CONFIG SET redis-cell.top-capacity -1").contains("top-capacity"));
        ok(c, "CONFIG SET redis-cell.top-capacity 0");
        five(c, "FW.INCR k0 0 60s");
        assert!(top(c, "CL.TOP").is_empty());
    }
    // Bad module arguments fail the load.
    let (_, log) = Server::refusing_to_start(Options {
        module_args: vec!["top-capacity".into(), "lots".into()],
        ..Options::default()
    });
    assert!(log.contains("bad module arguments"), "{log}");
}

fn set_policies(c: &mut redis::Connection) {
    ok(c, "CL.POLICY SET api GCRA 4 5 1s");
    ok(c, "CL.POLICY SET day FW 100 day SHADOW");
    ok(c, "CL.POLICY SET win SW 5 60s APPROX");
    ok(c, "CL.POLICY SET gone SW 5 60s");
    assert_eq!(int(c, "CL.POLICY DEL gone"), 1);
}

/// Checks the set left by [`set_policies`]; `key`: a fresh key to call the
/// policy on (none on a read-only replica).
fn check_policies(c: &mut redis::Connection, key: Option<&str>) {
    assert_eq!(policy_list(c), ["api", "day", "win"]);
    assert_eq!(policy_field(c, "api", "limiter"), "GCRA 4 5 1s");
    assert_eq!(policy_field(c, "day", "limiter"), "FW 100 day");
    assert_eq!(policy_field(c, "day", "shadow"), "1");
    assert_eq!(policy_field(c, "win", "limiter"), "SW 5 60s APPROX");
    if let Some(key) = key {
        assert_eq!(five(c, &format!("CL.LIMIT {key} api"))[..3], [0, 5, 4]);
    }
}

#[test]
fn persistence_rdb() {
    let s = Server::on(fresh_dir("policies-rdb"), &[]);
    set_policies(&mut s.conn());
    cmd(&mut s.conn(), "SAVE").unwrap();
    let s = Server::on(s.stop(), &[]);
    check_policies(&mut s.conn(), Some("after"));
    // An RDB saved without policies loads none: the set is replaced.
    let c = &mut s.conn();
    for name in ["api", "day", "win"] {
        int(c, &format!("CL.POLICY DEL {name}"));
    }
    cmd(c, "SAVE").unwrap();
    let s = Server::on(s.stop(), &[]);
    assert!(policy_list(&mut s.conn()).is_empty());
}

#[test]
fn persistence_aof_and_rewrite() {
    for preamble in ["yes", "no"] {
        let aof = [
            ("appendonly", "yes"),
            ("appendfsync", "always"),
            ("aof-use-rdb-preamble", preamble),
        ];
        // Replayed from the commands in the AOF.
        let s = Server::on(fresh_dir(&format!("policies-aof-{preamble}")), &aof);
        set_policies(&mut s.conn());
        let s = Server::on(s.stop(), &aof);
        check_policies(&mut s.conn(), Some("after-aof"));
        // After a rewrite: from the aux data of the RDB preamble, or from
        // the commands written after a base without one.
        let c = &mut s.conn();
        assert_eq!(
            cmd(c, "BGREWRITEAOF"),
            Ok(Value::SimpleString(
                "Background append only file rewriting started".into()
            ))
        );
        rewrite_done(c);
        // The policies are written apart from the command that forked:
        // BGREWRITEAOF itself never reaches the AOF (nor the replicas).
        let written = aof_commands(&s.dir);
        assert!(written.iter().any(|c| c[0] == "CL.POLICY"));
        assert!(written
            .iter()
            .all(|c| !c[0].eq_ignore_ascii_case("BGREWRITEAOF")));
        let s = Server::on(s.stop(), &aof);
        check_policies(&mut s.conn(), Some("after-rewrite"));
        // A rewrite the server starts later (scheduled behind a BGSAVE, it
        // forks from its cron), then changes after it.
        let c = &mut s.conn();
        ok(c, "CL.POLICY SET gone GCRA 1 1 1");
        ok(c, "CONFIG SET rdb-key-save-delay 100000");
        for i in 0..5 {
            ok(c, &format!("SET k{i} v"));
        }
        rewrite_done(c);
        cmd(c, "BGSAVE").unwrap();
        assert_eq!(
            cmd(c, "BGREWRITEAOF"),
            Ok(Value::SimpleString(
                "Background append only file rewriting scheduled".into()
            ))
        );
        rewrite_done(c);
        ok(c, "CONFIG SET rdb-key-save-delay 0");
        assert_eq!(int(c, "CL.POLICY DEL gone"), 1);
        let s = Server::on(s.stop(), &aof);
        check_policies(&mut s.conn(), Some("after-scheduled-rewrite"));
    }
}

fn rewrite_done(c: &mut redis::Connection) {
    eventually("rewrite done", || {
        let info: String = redis::cmd("INFO").arg("persistence").query(c).unwrap();
        info.contains("aof_rewrite_in_progress:0")
            && info.contains("aof_rewrite_scheduled:0")
            && info.contains("rdb_bgsave_in_progress:0")
    });
}

#[test]
fn replicas_and_failover() {
    let master = Server::start();
    let m = &mut master.conn();
    // Before the replica: it gets them by full sync (the RDB's aux data).
    set_policies(m);
    let replica = replica_of(&master, vec![]);
    let r = &mut replica.conn();
    eventually("policies on the replica", || policy_list(r).len() == 3);
    check_policies(r, None);
    // After: by the replication stream.
    ok(m, "CL.POLICY SET later GCRA 0 1 1s");
    assert_eq!(int(m, "CL.POLICY DEL win"), 1);
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(m).unwrap();
    assert_eq!(acked, 1);
    assert_eq!(policy_list(r), ["api", "day", "later"]);
    // A read-only replica refuses changes but answers reads.
    assert_eq!(
        err(r, "CL.POLICY SET x GCRA 1 1 1"),
        "READONLY You can't write against a read only replica."
    );
    assert_eq!(
        err(r, "CL.POLICY DEL api"),
        "READONLY You can't write against a read only replica."
    );
    assert!(top(r, "CL.TOP").is_empty());
    // Failover: the promoted replica keeps them and takes changes.
    ok(r, "REPLICAOF NO ONE");
    assert_eq!(policy_list(r), ["api", "day", "later"]);
    assert_eq!(five(r, "CL.LIMIT k later")[..3], [0, 1, 0]);
    ok(r, "CL.POLICY SET x GCRA 1 1 1");
    // A full sync replaces a replica's policies with its master's.
    ok(m, "CL.POLICY SET only-on-master GCRA 1 1 1");
    cmd(r, &format!("REPLICAOF 127.0.0.1 {}", master.port)).unwrap();
    eventually("resynced", || {
        policy_list(r).contains(&"only-on-master".to_string())
    });
    assert_eq!(policy_list(r), ["api", "day", "later", "only-on-master"]);
}

/// A damaged policy set in an RDB file is refused (the server does not
/// load the file), never a crash; a policy whose limiter this version does
/// not read (a newer version's words) is kept, unusable, and the file
/// loads.
#[test]
fn a_damaged_policy_set_is_refused() {
    let checksum_off = [("rdbchecksum", "no")];
    let s = Server::on(fresh_dir("policies-damaged"), &checksum_off);
    ok(&mut s.conn(), "CL.POLICY SET api GCRA 4 5 1s");
    cmd(&mut s.conn(), "SAVE").unwrap();
    let dir = s.stop();
    let file = dir.join("dump.rdb");
    let good = std::fs::read(&file).unwrap();
    let at = good
        .windows(4)
        .position(|w| w == b"GCRA")
        .expect("the limiter's words in the file");
    // A limiter this module cannot read: kept, and refused by name.
    let mut unreadable = good.clone();
    unreadable[at + 3] = b'X';
    std::fs::write(&file, &unreadable).unwrap();
    let s = Server::on(dir.clone(), &checksum_off);
    assert_eq!(policy_list(&mut s.conn()), ["api"]);
    assert_eq!(
        err(&mut s.conn(), "CL.LIMIT k api"),
        "ERR policy 'api' holds a limiter this version of redis-cell does not read: set it again"
    );
    assert!(s.log().contains("policy 'api' is kept but cannot be used"));
    drop(s);
    // A payload cut short.
    let mut short = good.clone();
    short.truncate(at + 2);
    {
        let what = "truncated";
        let bytes = short;
        std::fs::write(&file, &bytes).unwrap();
        let (status, log) = Server::refusing_to_start(Options {
            config: vec![("rdbchecksum".into(), "no".into())],
            dir: Some(dir.clone()),
            ..Options::default()
        });
        assert!(status.code().is_some(), "{what}: killed by a signal: {log}");
        assert!(!log.contains("crashed by signal"), "{what}: {log}");
    }
    // The intact file still loads.
    std::fs::write(&file, &good).unwrap();
    let s = Server::on(dir, &checksum_off);
    assert_eq!(policy_list(&mut s.conn()), ["api"]);
}
