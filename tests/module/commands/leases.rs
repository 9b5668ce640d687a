//! CC.*: at most N requests in flight, each holding a lease that expires
//! unless renewed, against real servers with a controlled clock.

use crate::support::*;

/// `CC.ACQUIRE`'s reply: the five integers and the id (None when refused).
fn acquire(c: &mut redis::Connection, line: &str) -> ([i64; 5], Option<String>) {
    match cmd(c, line) {
        Ok(Value::Array(v)) if v.len() == 6 => {
            let mut five = [0; 5];
            for (slot, x) in five.iter_mut().zip(&v) {
                match x {
                    Value::Int(n) => *slot = *n,
                    other => panic!("{line}: {other:?}"),
                }
            }
            let id = match &v[5] {
                Value::BulkString(b) => Some(String::from_utf8(b.clone()).unwrap()),
                Value::Nil => None,
                other => panic!("{line}: id {other:?}"),
            };
            (five, id)
        }
        other => panic!("{line}: {other:?}"),
    }
}

#[test]
fn a_transcript() {
    let s = Server::start();
    let c = &mut s.conn();
    let a = acquire(c, "CC.ACQUIRE gen 2 10 ID a");
    assert_eq!(a, ([0, 2, 1, -1, 10], Some("a".into())));
    s.set_time(T0 + 3 * SEC);
    assert_eq!(acquire(c, "CC.ACQUIRE gen 2 10 ID b").0, [0, 2, 0, -1, 10]);
    // Full: the first lease frees in 7 s, the last in 10.
    assert_eq!(
        acquire(c, "CC.ACQUIRE gen 2 10 ID c"),
        ([1, 2, 0, 7, 10], None)
    );
    assert_eq!(
        acquire(c, "CC.ACQUIRE gen 2 10 ID c MS").0,
        [1, 2, 0, 7_000, 10_000]
    );
    // Full, but a peek is what quantity 0 gets: it fits.
    assert_eq!(five(c, "CC.PEEK gen 2"), [0, 2, 0, -1, 10]);
    // Over a lowered limit it does not, until the first lease expires.
    assert_eq!(five(c, "CC.PEEK gen 1"), [1, 1, 0, 7, 10]);
    assert_eq!(five(c, "CC.PEEK gen 3 MS"), [0, 3, 1, -1, 10_000]);
    // Acquiring again with a held id renews it (an idempotent retry).
    assert_eq!(acquire(c, "CC.ACQUIRE gen 2 10 ID a").0, [0, 2, 0, -1, 10]);
    assert_eq!(
        pttl(c, "gen"),
        10_000,
        "the key lives as long as its last lease"
    );
    // Release: 1 once, then 0.
    assert_eq!(int(c, "CC.RELEASE gen b"), 1);
    assert_eq!(int(c, "CC.RELEASE gen b"), 0);
    assert_eq!(int(c, "CC.RELEASE gen nobody"), 0);
    assert_eq!(acquire(c, "CC.ACQUIRE gen 2 10 ID c").0, [0, 2, 0, -1, 10]);
    // Renew extends from now; an expired lease cannot be renewed.
    s.set_time(T0 + 8 * SEC);
    assert_eq!(int(c, "CC.RENEW gen c 30"), 1);
    assert_eq!(pttl(c, "gen"), 30_000);
    s.set_time(T0 + 13 * SEC);
    assert_eq!(int(c, "CC.RENEW gen a 30"), 0, "a expired at 13 s exactly");
    assert_eq!(five(c, "CC.PEEK gen 2"), [0, 2, 1, -1, 25]);
    // The key goes with its last lease.
    assert_eq!(int(c, "CC.RELEASE gen c"), 1);
    assert_eq!(cmd(c, "EXISTS gen").unwrap(), Value::Int(0));
    // A limit of 0 refuses everything.
    assert_eq!(acquire(c, "CC.ACQUIRE z 0 10"), ([1, 0, 0, -1, 0], None));
    // Sub-second leases.
    assert_eq!(
        acquire(c, "CC.ACQUIRE short 1 0.25 ID x MS").0,
        [0, 1, 0, -1, 250]
    );
    assert_eq!(pttl(c, "short"), 250);
}

#[test]
fn generated_ids_are_distinct_random_hex() {
    let s = Server::start();
    let c = &mut s.conn();
    let mut ids = std::collections::HashSet::new();
    for _ in 0..500 {
        let (reply, id) = acquire(c, "CC.ACQUIRE many 1000 60");
        assert_eq!(reply[0], 0);
        let id = id.unwrap();
        assert_eq!(id.len(), 32);
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
        assert!(ids.insert(id));
    }
    // Any bytes can be an id.
    let weird: &[u8] = b"\x00\xff req \r\n";
    let v: Value = redis::cmd("CC.ACQUIRE")
        .arg("w")
        .arg(1)
        .arg(60)
        .arg("ID")
        .arg(weird)
        .query(c)
        .unwrap();
    assert_eq!(
        v,
        Value::Array(vec![
            Value::Int(0),
            Value::Int(1),
            Value::Int(0),
            Value::Int(-1),
            Value::Int(60),
            Value::BulkString(weird.to_vec()),
        ])
    );
    let released: i64 = redis::cmd("CC.RELEASE")
        .arg("w")
        .arg(weird)
        .query(c)
        .unwrap();
    assert_eq!(released, 1);
}

/// 50 clients on a limit of 5 at one frozen instant: exactly 5 hold a
/// lease; when a holder crashes (never releases), its slot comes back at
/// exactly the end of its lease.
#[test]
fn fifty_clients_and_a_crash() {
    let s = Server::start();
    let handles: Vec<_> = (0..50)
        .map(|i| {
            let mut c = s.conn();
            std::thread::spawn(move || {
                acquire(&mut c, &format!("CC.ACQUIRE pool 5 2 ID client{i}"))
            })
        })
        .collect();
    let results: Vec<([i64; 5], Option<String>)> =
        handles.into_iter().map(|h| h.join().unwrap()).collect();
    let holders: Vec<&String> = results.iter().filter_map(|r| r.1.as_ref()).collect();
    assert_eq!(holders.len(), 5);
    for (reply, id) in &results {
        if id.is_none() {
            assert_eq!(reply, &[1, 5, 0, 2, 2]);
        }
    }
    let c = &mut s.conn();
    // Four release; the fifth crashed.
    for id in &holders[..4] {
        assert_eq!(int(c, &format!("CC.RELEASE pool {id}")), 1);
    }
    s.set_time(T0 + 1_500 * MS);
    for i in 0..4 {
        assert_eq!(
            acquire(c, &format!("CC.ACQUIRE pool 5 2 ID new{i}")).0[0],
            0
        );
    }
    assert_eq!(five(c, "CC.PEEK pool 5 MS"), [0, 5, 0, -1, 2_000]);
    s.set_time(T0 + 2 * SEC - 1);
    assert_eq!(acquire(c, "CC.ACQUIRE pool 5 2 ID late").1, None);
    s.set_time(T0 + 2 * SEC);
    assert_eq!(acquire(c, "CC.ACQUIRE pool 5 2 ID late").0[..3], [0, 5, 0]);
}

#[test]
fn the_lease_type_behaves_like_a_redis_type() {
    let s = Server::start();
    let c = &mut s.conn();
    acquire(c, "CC.ACQUIRE t 5 60 ID one");
    acquire(c, "CC.ACQUIRE t 5 60 ID two");
    assert_eq!(
        cmd(c, "TYPE t").unwrap(),
        Value::SimpleString("cell-conc".into())
    );
    let wrongtype = "WRONGTYPE Operation against a key holding the wrong kind of value";
    assert_eq!(err(c, "GET t"), wrongtype);
    assert_eq!(err(c, "SW.ALLOW t 1 1"), wrongtype);
    assert_eq!(err(c, "CL.THROTTLE t 1 1 1"), wrongtype);
    five(c, "SW.ALLOW sw 1 60");
    assert_eq!(err(c, "CC.ACQUIRE sw 1 60"), wrongtype);
    assert_eq!(err(c, "CC.PEEK sw 1"), wrongtype);
    cmd(c, "COPY t t2").unwrap();
    assert_eq!(int(c, "CC.RELEASE t2 one"), 1);
    assert_eq!(
        five(c, "CC.PEEK t 5"),
        [0, 5, 3, -1, 60],
        "a copy is independent"
    );
    let dump: Vec<u8> = redis::cmd("DUMP").arg("t").query(c).unwrap();
    redis::cmd("RESTORE")
        .arg("t3")
        .arg(0)
        .arg(dump)
        .query::<()>(c)
        .unwrap();
    assert_eq!(five(c, "CC.PEEK t3 5"), [0, 5, 3, -1, 60]);
    // Memory grows with the leases held.
    let usage = |c: &mut redis::Connection, k: &str| -> i64 {
        redis::cmd("MEMORY").arg("USAGE").arg(k).query(c).unwrap()
    };
    let small = usage(c, "t");
    for i in 0..100 {
        acquire(c, &format!("CC.ACQUIRE big 1000 60 ID request-{i:04}"));
    }
    let per_lease = (usage(c, "big") - small) as f64 / 98.0;
    println!("MEMORY USAGE per held lease (12-byte ids): {per_lease:.1} bytes");
    assert!((12.0..=80.0).contains(&per_lease), "{per_lease}");
}

#[test]
fn errors_have_exact_texts_and_write_nothing() {
    let s = Server::start();
    let c = &mut s.conn();
    keys_of_every_type(c);
    let long_id = "x".repeat(1025);
    let cases: Vec<(String, &str)> = vec![
        (
            "CC.ACQUIRE k 1".into(),
            "ERR wrong number of arguments for 'cc.acquire' command",
        ),
        (
            "CC.ACQUIRE k -1 10".into(),
            "ERR invalid limit: must be 0 or greater",
        ),
        (
            "CC.ACQUIRE k x 10".into(),
            "ERR value is not an integer or out of range",
        ),
        (
            "CC.ACQUIRE k 1 0".into(),
            "ERR invalid lease: must be greater than 0 seconds",
        ),
        (
            "CC.ACQUIRE k 1 -2".into(),
            "ERR invalid lease: must be greater than 0 seconds",
        ),
        (
            "CC.ACQUIRE k 1 1.0000000001".into(),
            "ERR invalid lease: expected seconds or a number with a unit: ms, s, m, h or d",
        ),
        ("CC.ACQUIRE k 1 10 ID".into(), "ERR ID needs a value"),
        ("CC.ACQUIRE k 1 10 ID a ID".into(), "ERR ID given twice"),
        ("CC.ACQUIRE k 1 10 ID a ID b".into(), "ERR ID given twice"),
        ("CC.ACQUIRE k 1 10 MS MS".into(), "ERR MS given twice"),
        (
            "CC.ACQUIRE k 1 10 EXTRA".into(),
            "ERR unknown option 'EXTRA'",
        ),
        ("CC.RELEASE k a EXTRA".into(), "ERR unknown option 'EXTRA'"),
        ("CC.RENEW k a 10 MS".into(), "ERR unknown option 'MS'"),
        (
            format!("CC.ACQUIRE k 1 10 ID {long_id}"),
            "ERR invalid ID: at most 1024 bytes",
        ),
        (
            "CC.ACQUIRE k 1 9223372036".into(),
            "ERR parameters out of range: their nanosecond arithmetic overflows 64 bits",
        ),
        (
            "CC.ACQUIRE list 1 10".into(),
            "WRONGTYPE Operation against a key holding the wrong kind of value",
        ),
        (
            "CC.RELEASE k".into(),
            "ERR wrong number of arguments for 'cc.release' command",
        ),
        (
            "CC.RELEASE list a".into(),
            "WRONGTYPE Operation against a key holding the wrong kind of value",
        ),
        (
            "CC.RENEW k a".into(),
            "ERR wrong number of arguments for 'cc.renew' command",
        ),
        (
            "CC.RENEW k a 0".into(),
            "ERR invalid lease: must be greater than 0 seconds",
        ),
        (
            "CC.PEEK k".into(),
            "ERR wrong number of arguments for 'cc.peek' command",
        ),
        ("CC.PEEK k 1 X".into(), "ERR unknown option 'X'"),
        (
            "CC.HOLD k a 5 5".into(),
            "ERR invalid CC.HOLD: needs now >= 0 and an expiry after now",
        ),
        (
            "CC.HOLD k a 5 -1".into(),
            "ERR invalid CC.HOLD: needs now >= 0 and an expiry after now",
        ),
        (
            "CC.DROP k a -1".into(),
            "ERR invalid CC.DROP: needs now >= 0",
        ),
        (
            "CC.LOAD k junk".into(),
            "ERR invalid CC.LOAD payload: not serialized leases",
        ),
    ];
    for (line, want) in &cases {
        assert_eq!(err(c, line), as_server_says(line, want), "{line}");
        ping(c);
    }
    let keys: Vec<String> = redis::cmd("KEYS").arg("k").query(c).unwrap();
    assert!(keys.is_empty(), "errors wrote {keys:?}");
}

#[test]
fn crafted_lease_payloads_are_refused() {
    let s = Server::with(Options {
        config: vec![("rdbcompression".into(), "no".into())],
        ..Options::default()
    });
    let c = &mut s.conn();
    acquire(c, "CC.ACQUIRE src 3 60 ID abc");
    let dump: Vec<u8> = redis::cmd("DUMP").arg("src").query(c).unwrap();
    // The state, as CC.LOAD takes it: the string inside the DUMP.
    let len = usize::from(dump[11]);
    let state = dump[12..12 + len].to_vec();
    redis::cmd("CC.LOAD")
        .arg("copy")
        .arg(&state)
        .query::<()>(c)
        .unwrap();
    assert_eq!(
        pttl(c, "copy"),
        60_000,
        "CC.LOAD sets the expiry of the last lease"
    );
    assert_eq!(five(c, "CC.PEEK copy 3"), [0, 3, 2, -1, 60]);
    let mut rng = 0x9E37_79B9u64;
    for round in 0..2_000 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let mut p = state.clone();
        match round % 3 {
            0 => {
                let i = (rng % p.len() as u64) as usize;
                p[i] ^= (rng >> 8) as u8 | 1;
            }
            1 => p.truncate((rng % p.len() as u64) as usize),
            _ => p.push((rng >> 16) as u8),
        }
        if let Err(e) = redis::cmd("CC.LOAD")
            .arg("fuzz")
            .arg(&p)
            .query::<()>(c)
            .map_err(error_text)
        {
            assert_eq!(e, "ERR invalid CC.LOAD payload: not serialized leases");
        }
        // Whatever loaded is a consistent value.
        let _ = cmd(c, "CC.PEEK fuzz 3").unwrap();
        cmd(c, "DEL fuzz").unwrap();
    }
    ping(c);
}

#[test]
fn writes_fire_events() {
    let s = Server::start();
    let events = keyspace_events(&s, |c| {
        acquire(c, "CC.ACQUIRE ev 1 10 ID a");
        acquire(c, "CC.ACQUIRE ev 1 10 ID b"); // refused: nothing
        int(c, "CC.RENEW ev a 20");
        int(c, "CC.RELEASE ev a");
    });
    assert_eq!(
        events,
        [
            "cc.acquire ev",
            "expire ev",
            "cc.renew ev",
            "expire ev",
            "del ev"
        ]
    );
}

/// One rule for the four peeks: a peek answers what a request of quantity 0
/// would get, so a limiter exactly at its limit is not limited, and one
/// over it (a lowered limit) is.
#[test]
fn every_peek_at_the_limit_answers_as_quantity_zero() {
    let s = Server::start();
    let c = &mut s.conn();
    five(c, "CL.THROTTLE cl 1 1 10 2");
    five(c, "SW.ALLOW sw 2 10 2");
    five(c, "FW.INCR fw 2 10 2");
    acquire(c, "CC.ACQUIRE cc 2 10 ID a");
    acquire(c, "CC.ACQUIRE cc 2 10 ID b");
    for line in [
        "CL.PEEK cl 1 1 10",
        "SW.PEEK sw 2 10",
        "FW.PEEK fw 2 10",
        "CC.PEEK cc 2",
    ] {
        assert_eq!(five(c, line)[..4], [0, 2, 0, -1], "{line}");
    }
    for line in ["SW.PEEK sw 1 10", "FW.PEEK fw 1 10", "CC.PEEK cc 1"] {
        assert_eq!(five(c, line), [1, 1, 0, 10, 10], "{line}");
    }
}

#[test]
fn renewing_to_a_shorter_lease_answers_the_shorter_reset() {
    let s = Server::start();
    let c = &mut s.conn();
    assert_eq!(
        acquire(c, "CC.ACQUIRE short 5 60 ID a").0,
        [0, 5, 4, -1, 60]
    );
    assert_eq!(
        acquire(c, "CC.ACQUIRE short 5 10 ID a").0,
        [0, 5, 4, -1, 10]
    );
    assert_eq!(pttl(c, "short"), 10_000);
    assert_eq!(five(c, "CC.PEEK short 5"), [0, 5, 4, -1, 10]);
    assert_eq!(
        acquire(c, "CC.ACQUIRE short 5 2.5 ID a MS").0,
        [0, 5, 4, -1, 2_500]
    );
    assert_eq!(pttl(c, "short"), 2_500);
    // Another lease that lasts longer still sets the reset.
    acquire(c, "CC.ACQUIRE short 5 30 ID b");
    assert_eq!(
        acquire(c, "CC.ACQUIRE short 5 10 ID a").0,
        [0, 5, 3, -1, 30]
    );
    assert_eq!(five(c, "CC.PEEK short 5"), [0, 5, 3, -1, 30]);
}

/// `CC.DROP`, `CC.RELEASE` and `CC.RENEW` of an id that holds no lease (never
/// held, or expired) on an existing key change nothing: no write, no
/// `WATCH` abort, no keyspace event, nothing propagated.
#[test]
fn releasing_what_is_not_held_changes_nothing() {
    let master = Server::start();
    let replica = replica_of(&master, vec![]);
    let m = &mut master.conn();
    acquire(m, "CC.ACQUIRE k 5 60 ID a");
    s_acquire_expired(&master, m);
    cmd(m, "WAIT 1 5000").unwrap();
    let keys = vec!["k".to_string()];
    let before = snapshot(m, &keys);
    let now = T0 + 10 * SEC;
    let calls = [
        format!("CC.DROP k nobody {now}"),
        format!("CC.DROP k gone {now}"),
        "CC.RELEASE k nobody".to_string(),
        "CC.RELEASE k gone".to_string(),
        "CC.RENEW k nobody 30".to_string(),
        "CC.RENEW k gone 30".to_string(),
        format!("CC.DROP missing a {now}"),
    ];
    for line in &calls {
        let key = line.split_whitespace().nth(1).unwrap();
        assert!(!aborts_watch(&master, key, line), "WATCH aborted by {line}");
    }
    let events = keyspace_events(&master, |c| {
        for line in &calls {
            cmd(c, line).unwrap();
        }
    });
    assert!(events.is_empty(), "events {events:?}");
    assert_eq!(snapshot(m, &keys), before);
    cmd(m, "WAIT 1 5000").unwrap();
    let r = &mut replica.conn();
    assert_eq!(snapshot(r, &keys), before);
    let info: String = redis::cmd("INFO").arg("commandstats").query(r).unwrap();
    assert!(
        !info.contains("cmdstat_cc.drop"),
        "something propagated: {info}"
    );
    // A real release still writes, signals and propagates.
    assert!(aborts_watch(&master, "k", "CC.RELEASE k a"));
    let want = snapshot(m, &keys);
    eventually("the replica applies the release", || {
        snapshot(r, &keys) == want
    });
}

/// Leaves `gone` stored in `k` but expired at `T0 + 10 s` (the clock is
/// left there).
fn s_acquire_expired(s: &Server, c: &mut redis::Connection) {
    acquire(c, "CC.ACQUIRE k 5 5 ID gone");
    s.set_time(T0 + 10 * SEC);
    // Let a server that caches its clock (Valkey 9) catch up.
    std::thread::sleep(std::time::Duration::from_millis(5));
}
