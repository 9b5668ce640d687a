//! `GCRA`, the opt-in command of Redis 8.8's milestones
//! (docs/commands/gcra.md): absent unless the module is loaded with
//! `gcra-command yes`, left alone where the server already has one, and
//! then exactly `CL.THROTTLE` on the same keys, with the milestone's
//! argument errors word for word and `CL.THROTTLE`'s replicated effect.

use crate::support::*;
use std::path::PathBuf;
use std::process::Command;

fn enabled() -> Server {
    Server::with(Options {
        module_args: vec!["gcra-command".into(), "yes".into()],
        ..Options::default()
    })
}

fn info(c: &mut redis::Connection) -> String {
    redis::cmd("INFO").arg("redis-cell").query(c).unwrap()
}

#[test]
fn without_the_option_there_is_no_gcra_command() {
    let s = Server::start();
    let c = &mut s.user_conn();
    let e = err(c, "GCRA k 5 10 60");
    assert!(e.starts_with("ERR unknown command"), "{e}");
    assert_eq!(
        cmd(c, "COMMAND INFO gcra").unwrap(),
        Value::Array(vec![Value::Nil])
    );
    assert!(!info(c).contains("gcra"), "{}", info(c));
    assert_eq!(cmd(c, "EXISTS k").unwrap(), Value::Int(0));
    assert!(!s.log().contains("GCRA registered"), "{}", s.log());
    // `gcra-command no` is the default, said explicitly.
    let s = Server::with(Options {
        module_args: vec!["gcra-command".into(), "no".into()],
        ..Options::default()
    });
    let e = err(&mut s.user_conn(), "GCRA k 5 10 60");
    assert!(e.starts_with("ERR unknown command"), "{e}");
}

#[test]
fn a_bad_value_refuses_the_load() {
    let (_, log) = Server::refusing_to_start(Options {
        module_args: vec!["gcra-command".into(), "maybe".into()],
        ..Options::default()
    });
    assert!(
        log.contains("bad module arguments; expected `gcra-command yes` or `gcra-command no`"),
        "{log}"
    );
}

#[test]
fn enabled_it_is_registered_beside_the_other_module_arguments() {
    let s = Server::with(Options {
        module_args: vec![
            "top-capacity".into(),
            "16".into(),
            "gcra-command".into(),
            "YES".into(),
        ],
        ..Options::default()
    });
    let c = &mut s.user_conn();
    assert_eq!(five(c, "GCRA k 5 10 60"), [0, 6, 5, -1, 6]);
    assert!(s.log().contains("GCRA registered"), "{}", s.log());
    assert!(info(c).contains("redis-cell_gcra_calls:1"), "{}", info(c));
    if server_version().has_7_0() {
        let Value::Array(pair) = cmd(c, "CONFIG GET redis-cell.top-capacity").unwrap() else {
            panic!("CONFIG GET")
        };
        assert_eq!(pair[1], Value::BulkString(b"16".to_vec()));
        // Flags and key spec as the milestone's: write denyoom fast, RW
        // access update.
        let info = format!("{:?}", cmd(c, "COMMAND INFO gcra").unwrap());
        for flag in ["write", "denyoom", "fast", "RW", "access", "update"] {
            assert!(info.contains(&format!("\"{flag}\"")), "{flag}: {info}");
        }
        let docs = format!("{:?}", cmd(c, "COMMAND DOCS gcra").unwrap());
        for part in [
            "tokens_per_period",
            "double",
            "TOKENS",
            env!("CARGO_PKG_VERSION"),
        ] {
            assert!(docs.contains(part), "{part}: {docs}");
        }
    }
    if server_version().has_redis(7, 4) {
        let cat = format!("{:?}", cmd(c, "ACL CAT ratelimit").unwrap());
        assert!(cat.contains("\"gcra\""), "{cat}");
    }
    let page = std::fs::read_to_string(concat!(root!(), "/docs/commands/gcra.md")).unwrap();
    assert!(page
        .lines()
        .any(|l| l == "GCRA key max_burst tokens_per_period period [TOKENS count]"));
}

/// Whether a key read a moment ago was in its expiry millisecond: its
/// `PTTL` is 0 or 1, or -2 when the server expired it in between.
fn in_last_ms(ttl: i64) -> bool {
    ttl == -2 || (0..=1).contains(&ttl)
}

/// The same calls, at the same instants, as `GCRA` on one key and as
/// `CL.THROTTLE` on another: the same replies, values and expiries; then
/// each command continues the other's key.
#[test]
fn replies_and_state_are_cl_throttles() {
    let s = enabled();
    let c = &mut s.user_conn();
    // The server's background expiry deletes keys at random, among them
    // keys in their expiry millisecond, which lookups still see: it could
    // delete one key of a pair and not the other. Lazy expiry alone, on the
    // frozen clock, treats both alike.
    cmd(c, "DEBUG SET-ACTIVE-EXPIRE 0").unwrap();
    // (max_burst, tokens_per_period, period as GCRA takes it, as CL.THROTTLE does)
    let params = [
        ("5", "10", "60", "60"),
        ("0", "1", "1", "1"),
        ("2", "3", "0.5", "0.5"),
        ("15", "30", "60.0", "60"),
        ("4", "7", "1e1", "10"),
        ("3", "1000", "0.001", "1ms"),
    ];
    let steps: [(i64, i64); 12] = [
        (0, 1),
        (0, 1),
        (0, 3),
        (1, 1),
        (10 * MS, 2),
        (0, 10),
        (999 * MS, 1),
        (3 * SEC, 1),
        (SEC + 1, 4),
        (0, 1),
        (7 * SEC, 1),
        (100 * SEC, 2),
    ];
    let mut now = T0;
    for (i, (burst, count, period, cl_period)) in params.iter().enumerate() {
        let (a, b) = (format!("g{i}"), format!("t{i}"));
        // The last step left both states in their expiry millisecond.
        let mut fragile = false;
        for (step, tokens) in steps {
            now += step;
            s.set_time(now);
            // Valkey 9's cached clock catches up within a millisecond.
            std::thread::sleep(std::time::Duration::from_millis(3));
            // A state in its expiry millisecond may meanwhile have been
            // expired by the server's active expiry, which samples keys at
            // random, on one key and not the other (seen on Redis 8.2):
            // both then start this step from the same (empty) state.
            let (g_before, t_before) = (get(c, &a), get(c, &b));
            if g_before.is_none() != t_before.is_none() {
                let ttl = if g_before.is_some() {
                    pttl(c, &a)
                } else {
                    pttl(c, &b)
                };
                assert!(
                    in_last_ms(ttl),
                    "{a} before +{}: {g_before:?} {t_before:?}",
                    now - T0
                );
                cmd(c, &format!("DEL {a} {b}")).unwrap();
                fragile = false;
            }
            // Each key read right after its write: a bucket that empties
            // within the millisecond may be expired by the time the other
            // is read.
            let g = five(
                c,
                &format!("GCRA {a} {burst} {count} {period} TOKENS {tokens}"),
            );
            let (g_value, g_ttl) = (get(c, &a), pttl(c, &a));
            let t = five(
                c,
                &format!("CL.THROTTLE {b} {burst} {count} {cl_period} {tokens}"),
            );
            let (t_value, t_ttl) = (get(c, &b), pttl(c, &b));
            let at = now - T0;
            if g != t && fragile {
                // The states met at their expiry millisecond: the server
                // expired one between the check above and its command.
                cmd(c, &format!("DEL {a} {b}")).unwrap();
                fragile = false;
                continue;
            }
            assert_eq!(g, t, "{a} {burst} {count} {period} x{tokens} at +{at}");
            // A state at its expiry millisecond may be gone already on one
            // key and not yet on the other (the server's expiry of a key in
            // its last millisecond): the same state for both otherwise.
            if g_value.is_none() != t_value.is_none() {
                let ttl = if g_value.is_some() { g_ttl } else { t_ttl };
                assert!(in_last_ms(ttl), "{a} at +{at}: {g_value:?} {t_value:?}");
                // Both start the next step from the same (empty) state.
                cmd(c, &format!("DEL {a} {b}")).unwrap();
                fragile = false;
                continue;
            }
            assert_eq!(g_value, t_value, "{a} at +{at}");
            assert_eq!(g_ttl, t_ttl, "{a} at +{at}");
            fragile = g_value.is_some() && in_last_ms(g_ttl);
        }
        // The default is one token; and the keys are shared.
        let g = five(c, &format!("GCRA {b} {burst} {count} {period}"));
        let t = five(c, &format!("CL.THROTTLE {a} {burst} {count} {cl_period}"));
        assert_eq!(g, t, "{a}");
        assert_eq!(get(c, &a), get(c, &b), "{a}");
    }
    // More tokens than the burst holds: refused, never retryable.
    assert_eq!(
        five(c, "GCRA big 5 10 60 TOKENS 7"),
        five(c, "CL.THROTTLE big2 5 10 60 7")
    );
    assert_eq!(five(c, "GCRA big 5 10 60 TOKENS 7")[3], -1);
    assert_eq!(cmd(c, "EXISTS big big2").unwrap(), Value::Int(0));
    // The milestone page's three calls, in the module's replies.
    s.set_time(T0);
    std::thread::sleep(std::time::Duration::from_millis(3));
    assert_eq!(five(c, "GCRA api:user:123 5 10 60"), [0, 6, 5, -1, 6]);
    assert_eq!(
        five(c, "GCRA api:user:123 5 10 60 TOKENS 3"),
        [0, 6, 2, -1, 24]
    );
    for _ in 0..2 {
        five(c, "GCRA api:user:123 5 10 60");
    }
    assert_eq!(five(c, "GCRA api:user:123 5 10 60"), [1, 6, 0, 6, 36]);
    ping(c);
}

#[test]
fn errors_are_the_milestones_word_for_word_and_write_nothing() {
    let s = enabled();
    let c = &mut s.user_conn();
    five(c, "CL.THROTTLE e 5 10 60");
    let (value, ttl) = (get(c, "e"), pttl(c, "e"));
    keys_of_every_type(c);
    cmd(c, "SET junk abc").unwrap();
    let arity = "ERR wrong number of arguments for 'gcra' command";
    let range = "ERR value is out of range, value must between 1 and 9223372036854775807";
    let cases: &[(&str, &str)] = &[
        ("GCRA e 5 10", arity),
        ("GCRA e 5 10 60 TOKENS 1 x", arity),
        ("GCRA e x 10 60", "ERR value is not an integer or out of range"),
        ("GCRA e +5 10 60", "ERR value is not an integer or out of range"),
        ("GCRA e 05 10 60", "ERR value is not an integer or out of range"),
        ("GCRA e 5.0 10 60", "ERR value is not an integer or out of range"),
        ("GCRA e 99999999999999999999 10 60", "ERR value is not an integer or out of range"),
        ("GCRA e -1 10 60", "ERR value is out of range, must be positive"),
        ("GCRA e 5 0 60", range),
        ("GCRA e 5 -3 60", range),
        ("GCRA e 5 ten 60", "ERR value is not an integer or out of range"),
        ("GCRA e 5 10 abc", "ERR value is not a valid float"),
        ("GCRA e 5 10 60s", "ERR value is not a valid float"),
        ("GCRA e 5 10 nan", "ERR value is not a valid float"),
        ("GCRA e 5 10 1e400", "ERR value is not a valid float"),
        ("GCRA e 5 10 1e-400", "ERR value is not a valid float"),
        ("GCRA e 5 10 0", "ERR period must be > 0 and < 1e12"),
        ("GCRA e 5 10 -1", "ERR period must be > 0 and < 1e12"),
        ("GCRA e 5 10 1e12", "ERR period must be > 0 and < 1e12"),
        ("GCRA e 5 10 inf", "ERR period must be > 0 and < 1e12"),
        ("GCRA e 5 10 60 TOKENS", "ERR Missing TOKENS value"),
        ("GCRA e 5 10 60 tokens", "ERR Missing TOKENS value"),
        ("GCRA e 5 10 60 FOO 1", "ERR syntax error"),
        ("GCRA e 5 10 60 MS", "ERR syntax error"),
        ("GCRA e 5 10 60 3", "ERR syntax error"),
        ("GCRA e 5 10 60 TOKENS 0", range),
        ("GCRA e 5 10 60 TOKENS -1", range),
        ("GCRA e 5 10 60 TOKENS x", "ERR value is not an integer or out of range"),
        // The milestone's order: max_burst, then tokens_per_period, then
        // period, then TOKENS.
        ("GCRA e -1 0 0 TOKENS 0", "ERR value is out of range, must be positive"),
        ("GCRA e 5 0 0 TOKENS 0", range),
        ("GCRA e 5 10 0 TOKENS 0", "ERR period must be > 0 and < 1e12"),
        // The module's nanoseconds.
        (
            "GCRA e 5 10 1e10",
            "ERR parameters out of range: their nanosecond arithmetic overflows 64 bits",
        ),
        (
            "GCRA e 9223372036854775807 1 1",
            "ERR parameters out of range: their nanosecond arithmetic overflows 64 bits",
        ),
        (
            "GCRA e 5 2000000000 1",
            "ERR invalid tokens_per_period: more than one token per nanosecond over period",
        ),
        (
            "GCRA e 5 1 1e-10",
            "ERR invalid tokens_per_period: more than one token per nanosecond over period",
        ),
        // The key: CL.THROTTLE's state, or another type.
        (
            "GCRA junk 5 10 60",
            "ERR key holds a string that is not a valid CL.THROTTLE state (an integer TAT in nanoseconds)",
        ),
        ("GCRA list 5 10 60", "WRONGTYPE Operation against a key holding the wrong kind of value"),
        ("GCRA hash 5 10 60", "WRONGTYPE Operation against a key holding the wrong kind of value"),
    ];
    for (line, want) in cases {
        assert_eq!(err(c, line), as_server_says(line, want), "{line}");
        ping(c);
        assert_eq!((get(c, "e"), pttl(c, "e")), (value.clone(), ttl), "{line}");
    }
    assert_eq!(get(c, "junk").as_deref(), Some("abc"));
    // Every one of them was counted as an error of GCRA's (the arity
    // errors only where the server does not check arity itself).
    let errors = info(c)
        .lines()
        .find_map(|l| l.strip_prefix("redis-cell_gcra_errors:"))
        .map(|n| n.trim().parse::<usize>().unwrap())
        .unwrap();
    let checked_by_server = if server_version().has_7_0() { 1 } else { 0 };
    assert_eq!(errors, cases.len() - checked_by_server);
}

/// Replicas and the AOF get `SET key tat PXAT ms`, as for `CL.THROTTLE`: a
/// replica loaded without `gcra-command` applies it, and a refusal
/// propagates nothing.
#[test]
fn replication_and_the_aof_get_the_effect() {
    let master = Server::with(Options {
        module_args: vec!["gcra-command".into(), "yes".into()],
        config: vec![
            ("appendonly".into(), "yes".into()),
            ("appendfsync".into(), "always".into()),
        ],
        ..Options::default()
    });
    let replica = replica_of(&master, Vec::new());
    let m = &mut master.user_conn();
    let r = &mut replica.conn();
    assert_eq!(five(m, "GCRA r 1 1 10"), [0, 2, 1, -1, 10]);
    assert_eq!(five(m, "GCRA r 1 1 10 TOKENS 1"), [0, 2, 0, -1, 20]);
    assert_eq!(five(m, "GCRA r 1 1 10")[0], 1);
    cmd(m, "WAIT 1 5000").unwrap();
    eventually("the replica has the state", || get(r, "r") == get(m, "r"));
    assert_eq!(expire_time_ms(r, "r"), expire_time_ms(m, "r"));
    let tat = get(m, "r").unwrap();
    let aof = aof_commands(&master.dir);
    let effects: Vec<&Vec<String>> = aof
        .iter()
        .filter(|w| w[0].eq_ignore_ascii_case("SET"))
        .collect();
    assert_eq!(effects.len(), 2, "{aof:?}");
    let last = effects[1];
    assert_eq!(last[1], "r");
    assert_eq!(last[2], tat);
    assert!(last[3].eq_ignore_ascii_case("PXAT"), "{last:?}");
    assert!(
        !aof.iter().any(|w| w[0].eq_ignore_ascii_case("GCRA")),
        "{aof:?}"
    );
}

/// The stand-in for a server with its own `GCRA`: a module loaded first
/// that registers one.
fn other_gcra_module() -> PathBuf {
    let root = PathBuf::from(root!());
    let dir = root.join("target/other-gcra");
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(format!("libother_gcra-{}.so", std::process::id()));
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&out)
        .arg(root.join("tests/module/support/other_gcra.c"))
        .status()
        .expect("a C compiler (cc) is needed");
    assert!(status.success(), "building the other GCRA module failed");
    out
}

#[test]
fn a_gcra_the_server_already_has_is_left_alone() {
    let other = other_gcra_module();
    let mut config = Vec::new();
    if server_version().has_7_0() {
        config.push(("enable-module-command".to_string(), "yes".to_string()));
    }
    let s = Server::with(Options {
        without_module: true,
        config,
        ..Options::default()
    });
    let c = &mut s.conn();
    redis::cmd("MODULE")
        .arg("LOAD")
        .arg(other.to_str().unwrap())
        .query::<()>(c)
        .unwrap();
    redis::cmd("MODULE")
        .arg("LOAD")
        .arg(module_path().to_str().unwrap())
        .arg("gcra-command")
        .arg("yes")
        .query::<()>(c)
        .unwrap();
    let _ = std::fs::remove_file(&other);
    assert_eq!(
        cmd(c, "GCRA k 5 10 60").unwrap(),
        Value::SimpleString("the other GCRA".into())
    );
    assert_eq!(five(c, "CL.THROTTLE k 5 10 60"), [0, 6, 5, -1, 6]);
    assert!(
        s.log().contains(
            "gcra-command yes, but the server already has a GCRA command: the module's is not registered"
        ),
        "{}",
        s.log()
    );
    assert!(!info(c).contains("gcra"), "{}", info(c));
}

/// Random argument vectors: every call answers (a reply or an error) and
/// the server keeps running.
#[test]
fn hostile_arguments_never_hurt_the_server() {
    const SHAPES: &[&[u8]] = &[
        b"0",
        b"1",
        b"-1",
        b"5",
        b"60",
        b"0.5",
        b"1e-9",
        b"4e-10",
        b"1e-320",
        b"1e308",
        b"1e400",
        b"-inf",
        b"inf",
        b"nan",
        b"-0",
        b"-0.0",
        b"0x10",
        b" 1",
        b"1 ",
        b"9999999999.999",
        b"9223372036854775807",
        b"-9223372036854775808",
        b"9223372036854775808",
        b"TOKENS",
        b"tokens",
        b"",
        b"\xff\xfe",
        b"\x00",
    ];
    let s = enabled();
    let c = &mut s.user_conn();
    keys_of_every_type(c);
    cmd(c, "SET junk abc").unwrap();
    cmd(c, "SET neg -5").unwrap();
    let keys: &[&[u8]] = &[b"k", b"list", b"junk", b"neg", b"", b"\xff"];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut replies, mut errors) = (0, 0);
    for _ in 0..3000 {
        let mut words: Vec<Vec<u8>> = vec![b"GCRA".to_vec(), rng.pick(keys).to_vec()];
        let random = |rng: &mut Rng| match rng.below(5) {
            0 => (0..rng.below(10)).map(|_| rng.next() as u8).collect(),
            1 => rng.below(1 << 40).to_string().into_bytes(),
            _ => rng.pick(SHAPES).to_vec(),
        };
        if rng.below(2) == 0 {
            // A valid call with one word replaced, and maybe TOKENS.
            words.extend([b"5".to_vec(), b"10".to_vec(), b"60".to_vec()]);
            if rng.below(2) == 0 {
                words.extend([b"TOKENS".to_vec(), b"2".to_vec()]);
            }
            let i = 2 + rng.below(words.len() as u64 - 1) as usize;
            if i < words.len() && rng.below(3) > 0 {
                words[i] = random(&mut rng);
            }
        } else {
            for _ in 0..rng.below(7) {
                let word = random(&mut rng);
                words.push(word);
            }
        }
        let refs: Vec<&[u8]> = words.iter().map(Vec::as_slice).collect();
        match run(c, &refs) {
            Ok(Value::Array(v)) if v.len() == 5 => replies += 1,
            Ok(other) => panic!("{words:?}: {other:?}"),
            Err(e) => {
                assert!(
                    e.starts_with("ERR ") || e.starts_with("WRONGTYPE "),
                    "{words:?}: {e}"
                );
                errors += 1;
            }
        }
    }
    ping(c);
    assert!(
        replies > 0 && errors > 0,
        "{replies} replies, {errors} errors"
    );
    assert_eq!(get(c, "junk").as_deref(), Some("abc"));
}
