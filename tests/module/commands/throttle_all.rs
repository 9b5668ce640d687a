//! CL.THROTTLEALL: several limiters decided at one instant, all keys
//! written only when all allow, exactly as the single commands would.

use crate::support::*;

#[test]
fn a_transcript() {
    let s = Server::start();
    let c = &mut s.conn();
    // 1 per 10 s with a burst of 2, and 3 per minute.
    let line = "CL.THROTTLEALL 2 {u}:sec {u}:min GCRA 1 1 10 FW 3 60";
    // Allowed: the binding limiter is the one with the least remaining.
    assert_eq!(six(c, line), [0, 2, 1, -1, 10, 1]);
    assert_eq!(six(c, line), [0, 2, 0, -1, 20, 1]);
    // The GCRA refuses for 10 s; the counter is not charged.
    assert_eq!(six(c, line), [1, 2, 0, 10, 20, 1]);
    assert_eq!(get(c, "{u}:min").as_deref(), Some("2"));
    s.set_time(T0 + 10 * SEC);
    // Both have none left: the first one binds.
    assert_eq!(six(c, line), [0, 2, 0, -1, 20, 1]);
    s.set_time(T0 + 30 * SEC);
    // Now the fixed window refuses for 30 s, longer than the GCRA's wait.
    assert_eq!(six(c, line), [1, 3, 0, 30, 30, 2]);
    assert_eq!(get(c, "{u}:sec").as_deref(), Some("1700000030000000000"));
    // Milliseconds, and a quantity for both.
    assert_eq!(
        six(c, "CL.THROTTLEALL 2 {u}:sec {u}:min GCRA 1 1 10 FW 3 60 MS"),
        [1, 3, 0, 30_000, 30_000, 2]
    );
    assert_eq!(
        six(
            c,
            "CL.THROTTLEALL 2 a b SW 5 60 FW 5 60 ALIGN QUANTITY 5 ms"
        ),
        [0, 5, 0, -1, 60_000, 1]
    );
    // A request too large for one limiter can never fit: -1 beats any wait.
    assert_eq!(
        six(
            c,
            "CL.THROTTLEALL 2 {u}:sec x GCRA 1 1 10 SW 100 60 QUANTITY 3"
        ),
        [1, 2, 2, -1, 0, 1]
    );
    assert_eq!(cmd(c, "EXISTS x").unwrap(), Value::Int(0));
    // Quantity 0 looks; like CL.THROTTLE, the GCRA stores its TAT.
    assert_eq!(
        six(c, "CL.THROTTLEALL 1 fresh GCRA 4 1 10 QUANTITY 0"),
        [0, 5, 5, -1, 0, 1]
    );
}

#[test]
fn errors_have_exact_texts_and_write_nothing() {
    let s = Server::start();
    let c = &mut s.conn();
    keys_of_every_type(c);
    cmd(c, "SET junk x").unwrap();
    let numkeys =
        "ERR invalid numkeys: must be a positive integer, with a key and a limiter for each";
    let count = "ERR CL.THROTTLEALL needs exactly numkeys limiters, one for each key";
    let unknown = "ERR unknown limiter: expected GCRA, SW or FW";
    let twice = "ERR a key is named twice: each limiter needs a key of its own";
    let cases: &[(&str, &str)] = &[
        ("CL.THROTTLEALL 1 a SW", "ERR wrong number of arguments for 'cl.throttleall' command"),
        ("CL.THROTTLEALL 0 a SW 1 1", numkeys),
        ("CL.THROTTLEALL -1 a SW 1 1", numkeys),
        ("CL.THROTTLEALL x a SW 1 1", numkeys),
        ("CL.THROTTLEALL 3 a SW 1 1", numkeys),
        (
            "CL.THROTTLEALL 101 a SW 1 1",
            "ERR invalid numkeys: at most 100 limiters in one call",
        ),
        ("CL.THROTTLEALL 2 a b SW 1 1", count),
        ("CL.THROTTLEALL 2 a b SW 1 1 FW 1", count),
        ("CL.THROTTLEALL 1 a SW 1 1 FW 1 1", count),
        ("CL.THROTTLEALL 2 a b SW 1 1 QUANTITY 2", count),
        ("CL.THROTTLEALL 1 a TB 1 1", unknown),
        ("CL.THROTTLEALL 2 a a SW 1 1 FW 1 1", twice),
        ("CL.THROTTLEALL 1 a SW 1 1 EXTRA", "ERR unknown option 'EXTRA'"),
        ("CL.THROTTLEALL 2 a b SW 1 1 ALIGN FW 1 1", "ERR unknown option 'ALIGN'"),
        ("CL.THROTTLEALL 1 a SW 1 1 MS MS", "ERR MS given twice"),
        ("CL.THROTTLEALL 1 a SW 1 1 QUANTITY", "ERR QUANTITY needs a value"),
        ("CL.THROTTLEALL 1 a SW 1 1 QUANTITY 1 QUANTITY 1", "ERR QUANTITY given twice"),
        ("CL.THROTTLEALL 1 a SW 1 1 APPROX APPROX", "ERR APPROX given twice"),
        ("CL.THROTTLEALL 1 a FW 1 1 TZ", "ERR TZ needs a value"),
        ("CL.THROTTLEALL 1 a SW 1 1 QUANTITY -1", "ERR invalid quantity: must be 0 or greater"),
        ("CL.THROTTLEALL 1 a SW 1 1 QUANTITY x", "ERR value is not an integer or out of range"),
        ("CL.THROTTLEALL 1 a GCRA -1 1 1", "ERR invalid max_burst: must be 0 or greater"),
        ("CL.THROTTLEALL 1 a GCRA 1 0 1", "ERR invalid count_per_period: must be 1 or greater"),
        ("CL.THROTTLEALL 1 a GCRA 1 1 0", "ERR invalid period: must be greater than 0 seconds"),
        ("CL.THROTTLEALL 1 a SW -1 1", "ERR invalid limit: must be 0 or greater"),
        ("CL.THROTTLEALL 1 a FW 1 0", "ERR invalid window: must be greater than 0 seconds"),
        ("CL.THROTTLEALL 1 a FW 1 1.5x", "ERR invalid window: expected seconds or a number with a unit: ms, s, m, h or d"),
        // State of the wrong kind, after other keys were read: nothing written.
        ("CL.THROTTLEALL 2 a list GCRA 1 1 1 SW 1 1", "WRONGTYPE Operation against a key holding the wrong kind of value"),
        ("CL.THROTTLEALL 2 a junk GCRA 1 1 1 FW 1 1", "ERR key holds a string that is not a valid FW.INCR counter (an integer)"),
        ("CL.THROTTLEALL 2 a junk SW 1 1 GCRA 1 1 1", "ERR key holds a string that is not a valid CL.THROTTLE state (an integer TAT in nanoseconds)"),
    ];
    for (line, want) in cases {
        assert_eq!(err(c, line), as_server_says(line, want), "{line}");
        ping(c);
    }
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(c).unwrap();
    let mut keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, ["hash", "junk", "list", "set", "stream", "zset"]);
    // Keys of the two kinds of sliding window do not mix either.
    five(c, "SW.ALLOW ex 5 60");
    assert_eq!(
        err(c, "CL.THROTTLEALL 2 b ex SW 5 60 SW 5 60 APPROX"),
        "ERR key holds an exact sliding window; APPROX needs a key of its own"
    );
    assert_eq!(cmd(c, "EXISTS b").unwrap(), Value::Int(0));
}

/// Limiters of every kind on keys of one user, with the parameters the
/// single commands below use for the same keys.
const LIMITERS: &[(&str, &str, &str)] = &[
    ("{u}:g", "GCRA 3 5 1", "CL.THROTTLE {u}:g 3 5 1"),
    ("{u}:s", "SW 6 1.5", "SW.ALLOW {u}:s 6 1.5"),
    ("{u}:a", "SW 6 2 APPROX", "SW.ALLOW {u}:a 6 2 APPROX"),
    ("{u}:f", "FW 5 1", "FW.INCR {u}:f 5 1"),
    ("{u}:fa", "FW 4 0.75 ALIGN", "FW.INCR {u}:fa 4 0.75 ALIGN"),
];

/// Restores `keys` on `c` to `saved` (a snapshot): the rollback of single
/// commands when one of them refused.
fn roll_back(c: &mut redis::Connection, saved: &[(String, Value, i64)]) {
    for (key, dump, at) in saved {
        cmd(c, &format!("DEL {key}")).unwrap();
        if let Value::BulkString(payload) = dump {
            let mut restore = redis::cmd("RESTORE");
            restore.arg(key).arg(*at).arg(payload.as_slice());
            if *at > 0 {
                restore.arg("ABSTTL");
            }
            restore.query::<()>(c).unwrap();
        }
    }
}

#[test]
fn all_or_nothing_is_the_single_commands_applied_only_when_all_allow() {
    let all = Server::start();
    let singles = Server::start();
    let a = &mut all.conn();
    let b = &mut singles.conn();
    let mut rng = Rng(0x2545_F491_4F6C_DD1Du64);
    let mut next = |n: u64| rng.below(n);
    let mut now = T0;
    let (mut went_ahead, mut refused) = (0, 0);
    for step in 0..1_500 {
        now += next(150) as i64 * MS + next(1_000_000) as i64;
        all.set_time(now);
        singles.set_time(now);
        // Two to four distinct limiters, in a random order.
        let mut chosen: Vec<usize> = (0..LIMITERS.len()).collect();
        for i in (1..chosen.len()).rev() {
            chosen.swap(i, next(i as u64 + 1) as usize);
        }
        chosen.truncate(2 + next(3) as usize);
        let q = next(4);
        let ms = next(2) == 1;
        let keys: Vec<&str> = chosen.iter().map(|&i| LIMITERS[i].0).collect();
        let limiters: Vec<&str> = chosen.iter().map(|&i| LIMITERS[i].1).collect();
        let unit = if ms { " MS" } else { "" };
        let line = format!(
            "CL.THROTTLEALL {} {} {} QUANTITY {q}{unit}",
            keys.len(),
            keys.join(" "),
            limiters.join(" ")
        );
        let got = six(a, &line);

        // The same with single commands, rolled back if one refused.
        let names: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        let saved = snapshot(b, &names);
        let replies: Vec<[i64; 5]> = chosen
            .iter()
            .map(|&i| five(b, &format!("{} {q}{unit}", LIMITERS[i].2)))
            .collect();
        let any_refused = replies.iter().any(|r| r[0] == 1);
        if any_refused {
            roll_back(b, &saved);
            refused += 1;
        } else {
            went_ahead += 1;
        }
        let index = got[5] as usize;
        assert!((1..=replies.len()).contains(&index), "{line}: {got:?}");
        let binding = replies[index - 1];
        assert_eq!(got[..5], binding, "{line}: {got:?} vs {replies:?}");
        // The binding one is the tightest, as far as the rounded replies tell.
        let wait = |r: &[i64; 5]| if r[3] == -1 { i64::MAX } else { r[3] };
        for r in &replies {
            if any_refused {
                assert!(
                    r[0] == 0 || wait(r) <= wait(&binding),
                    "{line}: {replies:?}"
                );
            } else {
                assert!(r[2] >= binding[2], "{line}: {replies:?}");
            }
        }
        if step % 50 == 0 || step == 1_499 {
            let names: Vec<String> = LIMITERS.iter().map(|l| l.0.to_string()).collect();
            assert_eq!(snapshot(a, &names), snapshot(b, &names), "after {line}");
        }
    }
    assert!(
        went_ahead > 200 && refused > 200,
        "{went_ahead} / {refused}"
    );
}

#[test]
fn inside_multi_and_scripts() {
    let s = Server::start();
    let c = &mut s.conn();
    let replies: Vec<Vec<i64>> = redis::pipe()
        .atomic()
        .cmd("CL.THROTTLEALL")
        .arg(2)
        .arg("m1")
        .arg("m2")
        .arg("GCRA")
        .arg(1)
        .arg(1)
        .arg(10)
        .arg("SW")
        .arg(5)
        .arg(10)
        .cmd("CL.THROTTLEALL")
        .arg(1)
        .arg("m2")
        .arg("SW")
        .arg(5)
        .arg(10)
        .arg("QUANTITY")
        .arg(4)
        .query(c)
        .unwrap();
    assert_eq!(
        replies,
        [vec![0, 2, 1, -1, 10, 1], vec![0, 5, 0, -1, 10, 1]]
    );
    let lua: Vec<i64> = redis::cmd("EVAL")
        .arg("return redis.call('CL.THROTTLEALL', 2, KEYS[1], KEYS[2], 'GCRA', 1, 1, 10, 'SW', 5, 10)")
        .arg(2)
        .arg("m1")
        .arg("m2")
        .query(c)
        .unwrap();
    assert_eq!(lua, [1, 5, 0, 10, 10, 2]);
}

#[test]
fn keys_are_declared_for_getkeys_and_acls() {
    let s = Server::start();
    let c = &mut s.conn();
    let keys: Vec<String> = redis::cmd("COMMAND")
        .arg("GETKEYS")
        .arg("CL.THROTTLEALL")
        .arg(3)
        .arg("k1")
        .arg("k2")
        .arg("k3")
        .arg("GCRA")
        .arg(1)
        .arg(1)
        .arg(1)
        .arg("SW")
        .arg(1)
        .arg(1)
        .arg("FW")
        .arg(1)
        .arg(1)
        .query(c)
        .unwrap();
    assert_eq!(keys, ["k1", "k2", "k3"]);
    cmd(
        c,
        "ACL SETUSER limiter on >secret ~rl:* resetchannels -@all +cl.throttleall",
    )
    .unwrap();
    let u = &mut s.conn();
    cmd(u, "AUTH limiter secret").unwrap();
    six(u, "CL.THROTTLEALL 2 rl:a rl:b SW 1 1 FW 1 1");
    let e = err(u, "CL.THROTTLEALL 2 rl:a other SW 1 1 FW 1 1");
    assert!(e.starts_with("NOPERM"), "{e}");
}

#[test]
fn writes_fire_the_single_commands_events() {
    let s = Server::start();
    let events = keyspace_events(&s, |c| {
        six(c, "CL.THROTTLEALL 3 g s f GCRA 1 1 10 SW 1 10 FW 2 10");
        six(c, "CL.THROTTLEALL 3 g s f GCRA 1 1 10 SW 1 10 FW 2 10"); // refused
    });
    assert_eq!(
        events,
        [
            "set g",
            "expire g",
            "sw.allow s",
            "expire s",
            "incrby f",
            "expire f"
        ]
    );
}

/// `MS` changes only the unit of the two durations, on every command: the
/// decision, limit and remaining are the same, and the seconds are the
/// milliseconds under the seconds rule.
#[test]
fn milliseconds_and_seconds_agree_on_every_command() {
    let s = Server::start();
    let c = &mut s.conn();
    let commands = [
        "CL.THROTTLE {k} 3 2 1.5 {q}",
        "CL.PEEK {k} 3 2 1.5",
        "SW.ALLOW {k} 5 2.5 {q}",
        "SW.ALLOW {k} 5 2.5 {q} APPROX",
        "SW.PEEK {k} 5 2.5",
        "FW.INCR {k} 5 2.5 {q}",
        "FW.INCR {k} 5 0.7 {q} ALIGN",
        "FW.PEEK {k} 5 2.5",
    ];
    let mut x = 7u64;
    let mut now = T0;
    for round in 0..300 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        now += (x >> 40) as i64 % (400 * MS) + (x >> 20) as i64 % 1000;
        s.set_time(now);
        let q = (x >> 33) % 4;
        for (i, template) in commands.iter().enumerate() {
            // The same state on two keys: the call with MS on one, without
            // on the other.
            let line = |k: &str| template.replace("{k}", k).replace("{q}", &q.to_string());
            let secs = five(c, &line(&format!("s{i}")));
            let ms = five(c, &format!("{} MS", line(&format!("m{i}"))));
            assert_eq!(secs[..3], ms[..3], "round {round}: {}", line("k"));
            for (s, m) in [(secs[3], ms[3]), (secs[4], ms[4])] {
                if m == -1 {
                    assert_eq!(s, -1);
                } else {
                    // The seconds rule on a duration in ((m-1) ms, m ms].
                    let ceil = |ms: i64| (ms + 999).div_euclid(1000);
                    assert!(
                        s == ceil(m) || s == ceil(m - 1),
                        "{s} s vs {m} ms: {}",
                        line("k")
                    );
                }
            }
        }
    }
}

#[test]
fn replicas_and_the_aof_get_the_effects_as_one_transaction() {
    let master = Server::with(Options {
        config: vec![
            ("appendonly".into(), "yes".into()),
            ("appendfsync".into(), "always".into()),
        ],
        ..Options::default()
    });
    let replica = replica_of(&master, vec![]);
    let r = &mut replica.conn();
    // The replica's clock is far off: it must not matter.
    replica.set_time(T0 + 3_600 * SEC);
    let m = &mut master.conn();
    let line = "CL.THROTTLEALL 4 g s a f GCRA 1 1 10 SW 3 10 SW 3 10 APPROX FW 3 10";
    six(m, line);
    six(m, line);
    master.set_time(T0 + 2 * SEC);
    six(m, "CL.THROTTLEALL 2 s f SW 3 10 FW 3 10 QUANTITY 5"); // refused
    assert_eq!(
        cmd(m, "WAIT 1 5000").unwrap(),
        Value::Int(1),
        "replica did not acknowledge"
    );
    replica.set_time(T0 + 2 * SEC);
    let keys: Vec<String> = ["g", "s", "a", "f"].map(String::from).to_vec();
    assert_eq!(snapshot(r, &keys), snapshot(m, &keys));
    // Each call that went ahead is one MULTI/EXEC of its four effects.
    let names: Vec<String> = aof_commands(&master.dir)
        .into_iter()
        .map(|c| c[0].to_uppercase())
        .filter(|n| n != "SELECT")
        .collect();
    let one = ["MULTI", "SET", "SW.RECORD", "SW.RECORD", "SET", "EXEC"];
    assert_eq!(names, [one, one].concat(), "the AOF");
}

/// A fixed-window counter found without a TTL gets the end of its window
/// as its expiry whatever the call decides: refused by itself, allowed, or
/// allowed by itself and refused by another limiter (where nothing else
/// is written); and replicas get the same expiry.
#[test]
fn a_counter_without_ttl_gets_its_window_even_when_another_limiter_refuses() {
    let master = Server::start();
    let replica = replica_of(&master, vec![]);
    let m = &mut master.conn();
    six(m, "CL.THROTTLEALL 1 g GCRA 0 1 60"); // g is now full
    cmd(m, "SET stuck 2").unwrap();
    cmd(m, "SET stuck2 2").unwrap();
    // The counter has room, the GCRA refuses: only the repair is written.
    assert_eq!(
        six(m, "CL.THROTTLEALL 2 g stuck GCRA 0 1 60 FW 5 30"),
        [1, 1, 0, 60, 60, 1]
    );
    assert_eq!(get(m, "stuck").as_deref(), Some("2"));
    assert_eq!(pttl(m, "stuck"), 30_000);
    // The same with an aligned window, and the counter first.
    assert_eq!(
        six(m, "CL.THROTTLEALL 2 stuck2 g FW 5 40 ALIGN GCRA 0 1 60"),
        [1, 1, 0, 60, 60, 2]
    );
    assert_eq!(get(m, "stuck2").as_deref(), Some("2"));
    assert_eq!(expire_time_ms(m, "stuck2"), (T0 / MS / 40_000 + 1) * 40_000);
    cmd(m, "WAIT 1 5000").unwrap();
    let keys: Vec<String> = ["g", "stuck", "stuck2"].map(String::from).to_vec();
    assert_eq!(snapshot(&mut replica.conn(), &keys), snapshot(m, &keys));
    // Allowed by all: the counter is written with that same expiry.
    cmd(m, "SET stuck3 2").unwrap();
    assert_eq!(
        six(m, "CL.THROTTLEALL 1 stuck3 FW 5 30"),
        [0, 5, 2, -1, 30, 1]
    );
    assert_eq!(get(m, "stuck3").as_deref(), Some("3"));
    assert_eq!(pttl(m, "stuck3"), 30_000);
}

/// At most 100 limiters in one call: 100 are decided and written, 101 (or
/// any larger count, however many arguments follow) are refused before
/// anything is read or written.
#[test]
fn at_most_one_hundred_limiters_in_one_call() {
    let s = Server::start();
    let c = &mut s.conn();
    let call = |n: usize| {
        let keys: Vec<String> = (0..n).map(|i| format!("{{t}}:{i}")).collect();
        let limiters = ["GCRA 4 5 60", "SW 5 60", "SW 5 60 APPROX", "FW 5 60"];
        let mut line = format!("CL.THROTTLEALL {n} {}", keys.join(" "));
        for i in 0..n {
            line.push(' ');
            line.push_str(limiters[i % limiters.len()]);
        }
        line
    };
    assert_eq!(six(c, &call(100)), [0, 5, 4, -1, 12, 1]);
    assert_eq!(cmd(c, "DBSIZE").unwrap(), Value::Int(100));
    cmd(c, "FLUSHALL").unwrap();
    let too_many = "ERR invalid numkeys: at most 100 limiters in one call";
    for n in [101, 1_000] {
        assert_eq!(err(c, &call(n)), too_many, "{n} keys");
    }
    assert_eq!(
        err(c, "CL.THROTTLEALL 9223372036854775807 a FW 1 1"),
        too_many
    );
    assert_eq!(cmd(c, "DBSIZE").unwrap(), Value::Int(0));
}

/// A call's limiters are kept parsed by their words: the same words on
/// other keys, in another case, or after other calls answer as a first
/// parse does, and words that differ (a parameter, an option, a policy
/// changed in between) are read again.
#[test]
fn the_same_words_decide_as_when_first_read() {
    let s = Server::start();
    let c = &mut s.conn();
    let line = |k: &str, rest: &str| format!("CL.THROTTLEALL 2 {{{k}}}:a {{{k}}}:b {rest}");
    let limiters = "GCRA 1 1 10 FW 3 60";
    assert_eq!(six(c, &line("u", limiters)), [0, 2, 1, -1, 10, 1]);
    assert_eq!(six(c, &line("v", limiters)), [0, 2, 1, -1, 10, 1]);
    assert_eq!(
        six(c, &line("u", "gcra 1 1 10 fw 3 60")),
        [0, 2, 0, -1, 20, 1]
    );
    // Five other calls in between push the first one's words out.
    for i in 0..5 {
        six(c, &line("w", &format!("GCRA {i} 1 10 FW 3 60")));
    }
    assert_eq!(six(c, &line("u", limiters)), [1, 2, 0, 10, 20, 1]);
    // Options are words too.
    assert_eq!(
        six(c, &line("x", &format!("{limiters} MS"))),
        [0, 2, 1, -1, 10000, 1]
    );
    assert_eq!(
        six(c, &line("x", &format!("{limiters} QUANTITY 2 MS"))),
        [1, 2, 1, 10000, 10000, 1]
    );
    assert_eq!(
        six(c, &line("x", &format!("{limiters} MS QUANTITY 0"))),
        [0, 2, 1, -1, 10000, 1]
    );
    // A key's state is read at every call, whatever the words.
    cmd(c, "LPUSH {y}:b x").unwrap();
    assert_eq!(
        err(c, &line("y", limiters)),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    // A policy is looked up at every call.
    cmd(c, "CL.POLICY SET p GCRA 1 1 10").unwrap();
    let policy = "CL.THROTTLEALL 1 {z}:a POLICY p MS";
    assert_eq!(six(c, policy), [0, 2, 1, -1, 10000, 1]);
    cmd(c, "CL.POLICY SET p GCRA 9 1 10").unwrap();
    assert_eq!(six(c, policy), [0, 10, 8, -1, 20000, 1]);
}
