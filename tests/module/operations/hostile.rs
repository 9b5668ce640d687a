//! Hostile input and load: random argument vectors against keys of every
//! type, many clients on one key, and a million calls that must all expire.

use crate::support::*;
use redis::ConnectionLike;
use std::time::{Duration, Instant};

/// One random argument: numbers of every shape, binary junk, empty strings.
fn random_arg(rng: &mut Rng) -> Vec<u8> {
    const SHAPES: &[&[u8]] = &[
        b"0",
        b"1",
        b"-1",
        b"2",
        b"15",
        b"60",
        b"0.5",
        b"1.000000001",
        b"0.0000000001",
        b"9223372036854775807",
        b"-9223372036854775808",
        b"9223372036854775808",
        b"99999999999999999999999",
        b"1e9",
        b"nan",
        b"inf",
        b"-0",
        b"+5",
        b"007",
        b"",
        b" ",
        b"APPROX",
        b"ALIGN",
        b"COUNTALL",
        b"MS",
        b"MAXWAIT",
        b"QUANTITY",
        b"GCRA",
        b"SW",
        b"FW",
        b"ID",
        b"TZ",
        b"+09:00",
        b"month",
        b"week",
        b"approx",
        b"\xff\xfe\x00",
        b"\x00",
        b"1\x002",
        b"9223372036.854775807",
    ];
    match rng.below(4) {
        0 => (0..rng.below(12)).map(|_| rng.next() as u8).collect(),
        1 => rng.below(1 << 40).to_string().into_bytes(),
        _ => rng.pick(SHAPES).to_vec(),
    }
}

#[test]
fn random_arguments_never_hurt_the_server() {
    let s = Server::start();
    let c = &mut s.conn();
    keys_of_every_type(c);
    cmd(c, "SET junk \u{1}junk").unwrap();
    cmd(c, "SET tat 1700000005000000000").unwrap();
    five(c, "SW.ALLOW swlog 5 10 2");
    five(c, "SW.ALLOW swapprox 5 10 2 APPROX");
    cmd(c, "CC.ACQUIRE leases 5 10 ID a").unwrap();
    let keys: &[&[u8]] = &[
        b"list",
        b"hash",
        b"set",
        b"zset",
        b"stream",
        b"junk",
        b"tat",
        b"swlog",
        b"swapprox",
        b"leases",
        b"fresh",
        b"",
        b"\xff\x00",
    ];
    let commands: &[&[u8]] = &[
        b"CL.THROTTLE",
        b"CL.PEEK",
        b"CL.THROTTLEALL",
        b"CL.RESERVE",
        b"CL.REFUND",
        b"SW.ALLOW",
        b"SW.PEEK",
        b"SW.REFUND",
        b"FW.INCR",
        b"FW.PEEK",
        b"FW.REFUND",
        b"SW.RECORD",
        b"SW.UNRECORD",
        b"SW.LOAD",
        b"CC.ACQUIRE",
        b"CC.RELEASE",
        b"CC.RENEW",
        b"CC.PEEK",
        b"CC.HOLD",
        b"CC.DROP",
        b"CC.LOAD",
    ];
    let mut rng = Rng(0x5EED_1234_ABCD_0001);
    let payload = match cmd(c, "DUMP swlog").unwrap() {
        Value::BulkString(b) => b,
        other => panic!("{other:?}"),
    };
    let deadline = Instant::now() + Duration::from_secs(8);
    let mut sent = 0u64;
    while Instant::now() < deadline && sent < 200_000 {
        let mut p = redis::pipe();
        for _ in 0..200 {
            let name = rng.pick(commands);
            let mut words: Vec<Vec<u8>> = vec![name.to_vec()];
            if name == b"CL.THROTTLEALL" {
                // numkeys, keys, then limiter words, some of them sane.
                let n = rng.below(3) + 1;
                words.push(if rng.below(4) == 0 {
                    random_arg(&mut rng)
                } else {
                    n.to_string().into_bytes()
                });
                for _ in 0..n {
                    words.push(rng.pick(keys).to_vec());
                }
            } else {
                words.push(rng.pick(keys).to_vec());
            }
            for _ in 0..rng.below(if name == b"CL.THROTTLEALL" { 12 } else { 7 }) {
                words.push(random_arg(&mut rng));
            }
            if name == b"SW.LOAD" && rng.below(2) == 0 {
                // A real payload with a few bytes flipped.
                let mut p = payload.clone();
                for _ in 0..=rng.below(3) {
                    let i = rng.below(p.len() as u64) as usize;
                    p[i] ^= rng.next() as u8;
                }
                words.truncate(2);
                words.push(p);
            }
            s.set_time(T0 + rng.below(100) as i64 * SEC);
            let mut command = redis::cmd(std::str::from_utf8(&words[0]).unwrap());
            for w in &words[1..] {
                command.arg(w.as_slice());
            }
            p.add_command(command);
            sent += 1;
        }
        // Every reply is either a well-formed value or a well-formed error
        // with a Redis error code (each read apart, errors included); the
        // connection stays usable.
        let replies = c
            .req_packed_commands(&p.get_packed_pipeline(), 0, 200)
            .expect("a reply to every command");
        assert_eq!(replies.len(), 200);
        for r in replies {
            match r {
                Value::Array(items) => {
                    assert!([5, 6].contains(&items.len()), "{items:?}");
                    assert!(items[..5].iter().all(|v| matches!(v, Value::Int(_))));
                    // CL.THROTTLEALL's index, or CC.ACQUIRE's lease id.
                    assert!(items[5..]
                        .iter()
                        .all(|v| matches!(v, Value::Int(_) | Value::BulkString(_) | Value::Nil)));
                }
                Value::Int(n) => assert!(n == 0 || n == 1),
                Value::Okay | Value::SimpleString(_) => {}
                Value::ServerError(e) => {
                    let code = e.code();
                    assert!(["ERR", "WRONGTYPE"].contains(&code), "{e:?}");
                }
                other => panic!("malformed reply {other:?}"),
            }
        }
        ping(c);
    }
    assert!(sent >= 2_000, "only {sent} commands sent");
    assert!(s.log().matches("Guru Meditation").count() == 0);
}

#[test]
fn fifty_clients_on_one_key_never_over_admit() {
    let s = Server::start();
    let lines = [
        ("cl", "CL.THROTTLE c:{} 99 100 60"),
        ("sw", "SW.ALLOW s:{} 100 60"),
        ("swa", "SW.ALLOW a:{} 100 60 APPROX"),
        ("fw", "FW.INCR f:{} 100 60"),
    ];
    // At T0 every limiter admits exactly 100; 60 s later the GCRA bucket,
    // the log and the fixed window are full again, and the counter (T0 is
    // 20 s into its fixed window) still weighs 67 of the first 100.
    for (phase, at, expect) in [
        (0, T0, [100, 100, 100, 100]),
        (1, T0 + 60 * SEC, [100, 100, 33, 100]),
    ] {
        s.set_time(at);
        for ((name, line), want) in lines.iter().zip(expect) {
            let line = line.replace("{}", "hot");
            let handles: Vec<_> = (0..50)
                .map(|_| {
                    let mut c = s.conn();
                    let line = line.clone();
                    std::thread::spawn(move || {
                        let mut allowed = 0;
                        for _ in 0..10 {
                            let r = five(&mut c, &line);
                            allowed += i64::from(r[0] == 0);
                        }
                        allowed
                    })
                })
                .collect();
            let replies = handles.len() * 10;
            let allowed: i64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
            assert_eq!(replies, 500, "{name}: a reply was lost");
            assert_eq!(allowed, want, "{name}, phase {phase}: admitted {allowed}");
        }
    }
}

#[test]
fn a_million_calls_all_expire() {
    let s = Server::with(Options {
        config: vec![("hz".into(), "100".into())],
        ..Options::default()
    });
    let c = &mut s.conn();
    let used = |c: &mut redis::Connection| -> i64 {
        let info: String = redis::cmd("INFO").arg("memory").query(c).unwrap();
        info.lines()
            .find_map(|l| l.strip_prefix("used_memory:"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let before = used(c);
    let mut rng = Rng(99);
    let calls = 1_000_000;
    let batch = 5_000;
    for b in 0..calls / batch {
        s.set_time(T0 + b as i64 * 20 * MS);
        let mut p = redis::pipe();
        for _ in 0..batch {
            let k = rng.below(50_000);
            let _ = match rng.below(4) {
                0 => p
                    .cmd("CL.THROTTLE")
                    .arg(format!("c:{k}"))
                    .arg(5)
                    .arg(10)
                    .arg(10),
                1 => p.cmd("SW.ALLOW").arg(format!("s:{k}")).arg(5).arg(10),
                2 => p
                    .cmd("SW.ALLOW")
                    .arg(format!("a:{k}"))
                    .arg(5)
                    .arg(10)
                    .arg("APPROX"),
                _ => p.cmd("FW.INCR").arg(format!("f:{k}")).arg(5).arg(10),
            }
            .ignore();
        }
        p.query::<()>(c).unwrap();
    }
    let keys: i64 = redis::cmd("DBSIZE").query(c).unwrap();
    assert!(keys > 100_000, "only {keys} keys");
    // Past the longest window (an APPROX key lives two windows).
    s.set_time(T0 + (calls / batch) as i64 * 20 * MS + 21 * SEC);
    eventually("every key to expire", || {
        redis::cmd("DBSIZE").query::<i64>(c).unwrap() == 0
    });
    eventually("memory to be returned", || used(c) - before < 1 << 20);
}

#[test]
fn fifty_clients_on_the_real_clock_stay_within_the_rate() {
    let s = Server::with(Options {
        real_clock: true,
        ..Options::default()
    });
    // (command, burst allowance, admitted per second)
    let cases = [
        ("CL.THROTTLE rt:cl 9 200 1", 10.0, 200.0),
        ("SW.ALLOW rt:sw 50 0.25", 50.0, 200.0),
        ("FW.INCR rt:fw 50 0.25", 50.0, 200.0),
    ];
    for (line, burst, rate) in cases {
        let start = Instant::now();
        let handles: Vec<_> = (0..50)
            .map(|_| {
                let mut c = s.conn();
                std::thread::spawn(move || {
                    let (mut calls, mut allowed) = (0, 0);
                    let deadline = Instant::now() + Duration::from_millis(1500);
                    while Instant::now() < deadline {
                        allowed += i64::from(five(&mut c, line)[0] == 0);
                        calls += 1;
                    }
                    (calls, allowed)
                })
            })
            .collect();
        let results: Vec<(i64, i64)> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let elapsed = start.elapsed().as_secs_f64();
        let allowed: i64 = results.iter().map(|r| r.1).sum();
        let calls: i64 = results.iter().map(|r| r.0).sum();
        // A window-based limiter can admit a full window at each boundary,
        // so allow one extra window on top of the rate.
        let bound = burst * 2.0 + rate * elapsed;
        assert!(
            (allowed as f64) <= bound,
            "{line}: admitted {allowed} of {calls} in {elapsed:.2}s, bound {bound:.0}"
        );
        assert!(
            (allowed as f64) >= rate * 1.5 * 0.5,
            "{line}: admitted only {allowed} of {calls} in {elapsed:.2}s"
        );
        assert!(calls > allowed * 2, "{line}: the clients did not contend");
    }
}

/// The operators' commands under random words: policies set, read, used
/// and deleted with junk in every place, `SHADOW` and `POLICY` where
/// limiters go, `CL.TOP` with random options, the summaries' capacity
/// changed under them. Every reply is well formed and the server stays up.
#[test]
fn random_policy_and_top_commands_never_hurt_the_server() {
    let s = Server::start();
    let c = &mut s.conn();
    keys_of_every_type(c);
    let names: &[&[u8]] = &[
        b"api",
        b"day",
        b"",
        b"\xff\x00",
        b"x y",
        b"SHADOW",
        b"POLICY",
    ];
    let limiters: &[&[u8]] = &[
        b"GCRA 4 5 1s",
        b"GCRA 0 1 1",
        b"SW 5 60s",
        b"SW 5 60 APPROX",
        b"FW 100 day TZ +09:00",
        b"FW 10 60 ALIGN",
        b"FW 100 month TZ Europe/Berlin",
    ];
    let words: &[&[u8]] = &[
        b"SHADOW",
        b"POLICY",
        b"COUNT",
        b"RESET",
        b"MS",
        b"GCRA",
        b"SW",
        b"FW",
        b"0",
        b"1",
        b"-1",
        b"5",
        b"100000",
        b"9223372036854775808",
        b"",
        b"\x00",
        b"api",
        b"day",
        b"APPROX",
        b"TZ",
    ];
    let keys: &[&[u8]] = &[b"list", b"hash", b"k1", b"k2", b"{t}a", b"{t}b", b""];
    let mut rng = Rng(0x5EED_0FF1_CE00_0017);
    let (mut sent, mut answered) = (0u64, 0u64);
    // A number of commands rather than a time: a loaded machine sends them
    // more slowly, it does not send fewer.
    while sent < 3_000 {
        {
            let mut w: Vec<Vec<u8>> = Vec::new();
            let sane = |rng: &mut Rng, w: &mut Vec<Vec<u8>>| {
                for part in rng.pick(limiters).split(|b| *b == b' ') {
                    w.push(part.to_vec());
                }
            };
            match rng.below(8) {
                0 | 1 => {
                    w.extend([b"CL.POLICY".to_vec(), b"SET".to_vec()]);
                    w.push(rng.pick(names).to_vec());
                    if rng.below(3) > 0 {
                        sane(&mut rng, &mut w);
                    }
                }
                2 => w.extend([
                    b"CL.POLICY".to_vec(),
                    rng.pick(&[b"GET", b"DEL", b"LIST", b"NOPE"]).to_vec(),
                    rng.pick(names).to_vec(),
                ]),
                3 | 4 => w.extend([
                    b"CL.LIMIT".to_vec(),
                    rng.pick(keys).to_vec(),
                    rng.pick(names).to_vec(),
                ]),
                5 => {
                    w.extend([b"CL.THROTTLEALL".to_vec(), b"2".to_vec()]);
                    w.extend([b"{t}a".to_vec(), b"{t}b".to_vec()]);
                    for _ in 0..2 {
                        if rng.below(2) == 0 {
                            w.extend([b"POLICY".to_vec(), rng.pick(names).to_vec()]);
                        } else {
                            sane(&mut rng, &mut w);
                        }
                    }
                }
                6 => w.push(b"CL.TOP".to_vec()),
                _ => {
                    let value = rng.below(3000).to_string();
                    w.extend([b"CONFIG".to_vec(), b"SET".to_vec()]);
                    w.extend([b"redis-cell.top-capacity".to_vec(), value.into_bytes()]);
                }
            }
            if w[0] != b"CONFIG" && rng.below(2) == 0 {
                for _ in 0..=rng.below(3) {
                    w.push(if rng.below(4) == 0 {
                        random_arg(&mut rng)
                    } else {
                        rng.pick(words).to_vec()
                    });
                }
            }
            s.set_time(T0 + rng.below(100) as i64 * SEC);
            let mut command = redis::cmd(std::str::from_utf8(&w[0]).unwrap());
            for a in &w[1..] {
                command.arg(a.as_slice());
            }
            sent += 1;
            match command.query::<Value>(c) {
                Ok(Value::ServerError(e)) => panic!("{e:?}"),
                Ok(_) => answered += 1,
                // CONFIG SET of a module configuration is missing on 6.2.
                Err(e) => assert!(
                    e.code()
                        .is_some_and(|code| ["ERR", "WRONGTYPE"].contains(&code)),
                    "{w:?}: {e}"
                ),
            }
        }
        ping(c);
    }
    // Not only errors: policies were set and used.
    assert!(answered * 10 > sent, "only {answered} of {sent} answered");
    // The set is whole: every policy listed answers GET.
    let Value::Array(listed) = cmd(c, "CL.POLICY LIST").unwrap() else {
        panic!("LIST is an array");
    };
    for name in listed {
        let Value::BulkString(name) = name else {
            panic!("{name:?}")
        };
        let got = redis::cmd("CL.POLICY")
            .arg("GET")
            .arg(name.as_slice())
            .query::<Value>(c);
        assert!(
            matches!(got, Ok(Value::Array(_)) | Ok(Value::Map(_))),
            "{got:?}"
        );
    }
    assert!(s.log().matches("Guru Meditation").count() == 0);
}
