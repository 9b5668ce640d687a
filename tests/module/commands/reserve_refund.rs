//! CL.RESERVE (wait for a slot instead of being refused) and the refunds
//! (give back what was not used), against real servers.

use crate::support::*;

/// 50 clients reserve at one frozen instant: every admitted start is
/// distinct, spaced by the emission interval, never earlier than the rate
/// allows and never later than MAXWAIT; the rest are refused.
#[test]
fn fifty_clients_reserving_get_distinct_slots() {
    let s = Server::start();
    // 10 per second with bursts of 2: T = 100 ms; MAXWAIT 3 s.
    let line = "CL.RESERVE q 1 10 1 MAXWAIT 3 MS";
    let handles: Vec<_> = (0..50)
        .map(|_| {
            let mut c = s.conn();
            std::thread::spawn(move || five(&mut c, line))
        })
        .collect();
    let replies: Vec<[i64; 5]> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let mut starts: Vec<i64> = replies
        .iter()
        .filter(|r| r[0] == 0)
        .map(|r| r[3].max(0))
        .collect();
    starts.sort();
    // Two at once (the burst), then one every 100 ms up to 3 s.
    let expected: Vec<i64> = [0, 0]
        .into_iter()
        .chain((1..=30).map(|k| k * 100))
        .collect();
    assert_eq!(starts, expected);
    let refused: Vec<&[i64; 5]> = replies.iter().filter(|r| r[0] == 1).collect();
    assert_eq!(refused.len(), 50 - expected.len());
    for r in refused {
        assert_eq!(r[..3], [1, 2, 0]);
        assert_eq!(r[3], 3_100, "the next slot after the last one reserved");
    }
    // The bucket's TAT is the last slot's, plus one interval.
    assert_eq!(
        get(&mut s.conn(), "q").as_deref(),
        Some("1700000003200000000")
    );
}

#[test]
fn reservations_and_throttles_share_one_bucket() {
    let s = Server::start();
    let c = &mut s.conn();
    // 1 per second, burst 2.
    assert_eq!(five(c, "CL.THROTTLE k 1 1 1"), [0, 2, 1, -1, 1]);
    assert_eq!(five(c, "CL.RESERVE k 1 1 1 MAXWAIT 5"), [0, 2, 0, -1, 2]);
    // Full: a reservation waits for its slot; its wait is never early.
    assert_eq!(five(c, "CL.RESERVE k 1 1 1 MAXWAIT 5"), [0, 2, 0, 1, 3]);
    assert_eq!(
        five(c, "CL.RESERVE k 1 1 1 MAXWAIT 5 MS"),
        [0, 2, 0, 2_000, 4_000]
    );
    // A throttle is refused until the slots reserved before it have passed.
    assert_eq!(five(c, "CL.THROTTLE k 1 1 1"), [1, 2, 0, 3, 4]);
    // Quantity before MAXWAIT or after it; beyond MAXWAIT: refused, nothing taken.
    assert_eq!(five(c, "CL.RESERVE k 1 1 1 2 MAXWAIT 3.5"), [1, 2, 0, 4, 4]);
    assert_eq!(five(c, "CL.RESERVE k 1 1 1 MAXWAIT 3.5 2"), [1, 2, 0, 4, 4]);
    assert_eq!(get(c, "k").as_deref(), Some("1700000004000000000"));
    // MAXWAIT 0 is CL.THROTTLE.
    assert_eq!(
        five(c, "CL.RESERVE k 1 1 1 MAXWAIT 0"),
        five(c, "CL.THROTTLE k 1 1 1")
    );
    // Too large ever to fit: refused whatever the wait.
    assert_eq!(
        five(c, "CL.RESERVE k 1 1 1 3 MAXWAIT 100"),
        [1, 2, 0, -1, 4]
    );
    // Half a second later one fits now, and the next waits half a second,
    // reported as a whole second (a wait is never early).
    s.set_time(T0 + 3_500 * MS);
    assert_eq!(five(c, "CL.RESERVE k 1 1 1 MAXWAIT 1"), [0, 2, 0, -1, 2]);
    assert_eq!(five(c, "CL.RESERVE k 1 1 1 MAXWAIT 1"), [0, 2, 0, 1, 3]);
    // Reserved beyond the burst, the bucket is over its limit until then:
    // a peek says so.
    assert_eq!(five(c, "CL.PEEK k 1 1 1 MS"), [1, 2, 0, 500, 2_500]);
    // Once the reserved slots have passed, requests fit again.
    s.set_time(T0 + 5 * SEC);
    assert_eq!(five(c, "CL.THROTTLE k 1 1 1"), [0, 2, 0, -1, 2]);
}

#[test]
fn refunds_give_back_and_never_overshoot() {
    let s = Server::start();
    let c = &mut s.conn();
    // GCRA: charged 3 of 5, refund 1, then overshoot: the key goes.
    five(c, "CL.THROTTLE g 4 1 10 3");
    assert_eq!(five(c, "CL.REFUND g 4 1 10 1"), [0, 5, 3, -1, 20]);
    assert_eq!(pttl(c, "g"), 20_000);
    assert_eq!(five(c, "CL.REFUND g 4 1 10 1000 MS"), [0, 5, 5, -1, 0]);
    assert_eq!(cmd(c, "EXISTS g").unwrap(), Value::Int(0));
    // An absent key is full: nothing to give back, nothing written.
    assert_eq!(five(c, "CL.REFUND g 4 1 10 2"), [0, 5, 5, -1, 0]);
    assert_eq!(cmd(c, "EXISTS g").unwrap(), Value::Int(0));
    // Refund then admit: the refunded capacity is there again.
    five(c, "CL.THROTTLE h 1 1 10 2");
    assert_eq!(five(c, "CL.THROTTLE h 1 1 10")[0], 1);
    five(c, "CL.REFUND h 1 1 10 1");
    assert_eq!(five(c, "CL.THROTTLE h 1 1 10"), [0, 2, 0, -1, 20]);

    // Exact window: newest first, a larger entry reduced.
    five(c, "SW.ALLOW w 10 60 3");
    s.set_time(T0 + 10 * SEC);
    five(c, "SW.ALLOW w 10 60 4");
    assert_eq!(five(c, "SW.REFUND w 10 60 2"), [0, 10, 5, -1, 60]);
    // 2 left at T0 + 10 s and 3 at T0: giving back 3 removes the newer
    // and reduces the older to 2.
    assert_eq!(five(c, "SW.REFUND w 10 60 3"), [0, 10, 8, -1, 50]);
    assert_eq!(pttl(c, "w"), 50_000, "expires with its newest request now");
    assert_eq!(five(c, "SW.REFUND w 10 60 100"), [0, 10, 10, -1, 0]);
    assert_eq!(cmd(c, "EXISTS w").unwrap(), Value::Int(0));
    // APPROX: the current window's count, then the previous one's.
    five(c, "SW.ALLOW a 10 60 4 APPROX");
    s.set_time(T0 + 70 * SEC);
    five(c, "SW.ALLOW a 10 60 2 APPROX");
    let after = five(c, "SW.REFUND a 10 60 3 APPROX");
    assert_eq!(after, five(c, "SW.PEEK a 10 60 APPROX"));
    assert_eq!(five(c, "SW.REFUND a 10 60 50 APPROX"), [0, 10, 10, -1, 0]);
    assert_eq!(cmd(c, "EXISTS a").unwrap(), Value::Int(0));

    // Fixed window: down, not below 0, keeping the window's end.
    five(c, "FW.INCR f 5 60 4");
    s.set_time(T0 + 100 * SEC);
    assert_eq!(five(c, "FW.REFUND f 5 60 1"), [0, 5, 2, -1, 30]);
    assert_eq!(pttl(c, "f"), 30_000);
    assert_eq!(five(c, "FW.REFUND f 5 60 9"), [0, 5, 5, -1, 0]);
    assert_eq!(cmd(c, "EXISTS f").unwrap(), Value::Int(0));
}

#[test]
fn refund_and_reserve_errors_have_exact_texts_and_write_nothing() {
    let s = Server::start();
    let c = &mut s.conn();
    keys_of_every_type(c);
    let cases: &[(&str, &str)] = &[
        ("CL.RESERVE k 1 1 1 MAXWAIT", "ERR MAXWAIT needs a value"),
        (
            "CL.RESERVE k 1 1",
            "ERR wrong number of arguments for 'cl.reserve' command",
        ),
        ("CL.RESERVE k 1 1 1 2 3", "ERR quantity given twice"),
        (
            "CL.RESERVE k 1 1 1",
            "ERR CL.RESERVE needs MAXWAIT seconds: the longest the caller will wait for its slot",
        ),
        (
            "CL.RESERVE k 1 1 1 2 MS",
            "ERR CL.RESERVE needs MAXWAIT seconds: the longest the caller will wait for its slot",
        ),
        (
            "CL.RESERVE k 1 1 1 MAXWAIT -1",
            "ERR invalid MAXWAIT: must be 0 or greater",
        ),
        (
            "CL.RESERVE k 1 1 1 MAXWAIT x",
            "ERR invalid MAXWAIT: expected seconds or a number with a unit: ms, s, m, h or d",
        ),
        (
            "CL.RESERVE k 1 1 1 MAXWAIT 1 MAXWAIT 1",
            "ERR MAXWAIT given twice",
        ),
        (
            "CL.RESERVE k 1 1 1 MAXWAIT 1 2 3",
            "ERR quantity given twice",
        ),
        (
            "CL.RESERVE k 1 1 1 -2 MAXWAIT 1",
            "ERR invalid quantity: must be 0 or greater",
        ),
        (
            "CL.RESERVE k -1 1 1 MAXWAIT 1",
            "ERR invalid max_burst: must be 0 or greater",
        ),
        (
            "CL.RESERVE list 1 1 1 MAXWAIT 1",
            "WRONGTYPE Operation against a key holding the wrong kind of value",
        ),
        (
            "CL.REFUND k 1 1 1",
            "ERR wrong number of arguments for 'cl.refund' command",
        ),
        (
            "CL.REFUND k 1 1 1 -1",
            "ERR invalid quantity: must be 0 or greater",
        ),
        ("CL.REFUND k 1 1 1 1 X", "ERR unknown option 'X'"),
        (
            "CL.REFUND k 1 0 1 1",
            "ERR invalid count_per_period: must be 1 or greater",
        ),
        (
            "CL.REFUND list 1 1 1 1",
            "WRONGTYPE Operation against a key holding the wrong kind of value",
        ),
        (
            "SW.REFUND k 1 1",
            "ERR wrong number of arguments for 'sw.refund' command",
        ),
        (
            "SW.REFUND k 1 1 x",
            "ERR value is not an integer or out of range",
        ),
        (
            "SW.REFUND k -1 1 1",
            "ERR invalid limit: must be 0 or greater",
        ),
        ("SW.REFUND k 1 1 1 ALIGN", "ERR unknown option 'ALIGN'"),
        (
            "SW.REFUND list 1 1 1",
            "WRONGTYPE Operation against a key holding the wrong kind of value",
        ),
        (
            "FW.REFUND k 1 0 1",
            "ERR invalid window: must be greater than 0 seconds",
        ),
        ("FW.REFUND k 1 1 1 APPROX", "ERR unknown option 'APPROX'"),
        (
            "FW.REFUND list 1 1 1",
            "WRONGTYPE Operation against a key holding the wrong kind of value",
        ),
        (
            "SW.UNRECORD k 0 1 1",
            "ERR invalid SW.UNRECORD: needs window >= 1, at >= 0, quantity >= 1",
        ),
        (
            "SW.UNRECORD k 1 1 0",
            "ERR invalid SW.UNRECORD: needs window >= 1, at >= 0, quantity >= 1",
        ),
        ("SW.UNRECORD k 1 1 1 EXACT", "ERR syntax error"),
    ];
    for (line, want) in cases {
        assert_eq!(err(c, line), as_server_says(line, want), "{line}");
        ping(c);
    }
    five(c, "SW.ALLOW ex 5 60");
    five(c, "FW.INCR n 5 60");
    let before = (cmd(c, "DUMP ex").unwrap(), cmd(c, "DUMP n").unwrap());
    assert_eq!(
        err(c, "SW.REFUND ex 5 60 1 APPROX"),
        "ERR key holds an exact sliding window; APPROX needs a key of its own"
    );
    assert_eq!(
        err(c, "FW.REFUND ex 5 60 1"),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    assert_eq!(
        (cmd(c, "DUMP ex").unwrap(), cmd(c, "DUMP n").unwrap()),
        before
    );
    let keys: Vec<String> = redis::cmd("KEYS").arg("k").query(c).unwrap();
    assert!(keys.is_empty(), "errors wrote {keys:?}");
}

/// A random mix of reservations, throttles and refunds on a master whose
/// replica's clock is off, then an AOF restart after downtime: the replica
/// and the restarted server hold the master's state exactly, and no
/// command but the effects reached them.
#[test]
fn replicas_and_the_aof_hold_the_masters_state() {
    let aof = [("appendonly", "yes"), ("appendfsync", "always")];
    let master = Server::on(fresh_dir("refund"), &aof);
    let replica = replica_of(&master, vec![]);
    let r = &mut replica.conn();
    let m = &mut master.conn();
    let mut rng = Rng(0x1234_5678_9ABC_DEF1u64);
    let mut next = |n: u64| rng.below(n);
    let mut now = T0;
    let keys: Vec<String> = ["g", "s", "a", "f"].map(String::from).to_vec();
    for _ in 0..600 {
        now += next(400) as i64 * MS + next(1_000_000) as i64;
        master.set_time(now);
        replica.set_time(now + 5 * SEC + 17);
        let q = next(4);
        let line = match next(9) {
            0 => format!("CL.RESERVE g 2 4 1 {q} MAXWAIT 1.5"),
            1 => format!("CL.THROTTLE g 2 4 1 {q}"),
            2 => format!("CL.REFUND g 2 4 1 {q}"),
            3 => format!("SW.ALLOW s 8 2 {q}"),
            4 => format!("SW.REFUND s 8 2 {q}"),
            5 => format!("SW.ALLOW a 8 2 {q} APPROX"),
            6 => format!("SW.REFUND a 8 2 {q} APPROX"),
            7 => format!("FW.INCR f 6 1.5 {q}"),
            _ => format!("FW.REFUND f 6 1.5 {q}"),
        };
        five(m, &line);
    }
    assert_eq!(cmd(m, "WAIT 1 5000").unwrap(), Value::Int(1));
    replica.set_time(now);
    let expected = snapshot(m, &keys);
    assert_eq!(snapshot(r, &keys), expected);
    let info: String = redis::cmd("INFO").arg("commandstats").query(r).unwrap();
    for name in ["cl.reserve", "cl.refund", "sw.refund", "fw.refund"] {
        assert!(
            !info.contains(&format!("cmdstat_{name}:")),
            "{name} replicated"
        );
    }
    // The AOF replays to the same state after 3 s of downtime.
    drop(replica);
    let restarted = Server::on(master.stop_until(now + 3 * SEC), &aof);
    let expected = after_restart_at(expected, now + 3 * SEC);
    assert_eq!(snapshot(&mut restarted.conn(), &keys), expected);
}
