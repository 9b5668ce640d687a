//! The wall clock stepping back, and the end of 64-bit nanoseconds (the
//! year 2262): one rule for every limiter each time.

use crate::support::*;

/// Sets the clock and lets a server that caches it (Valkey 9) catch up.
fn step(s: &Server, nanos: i64) {
    s.set_time(nanos);
    std::thread::sleep(std::time::Duration::from_millis(5));
}

/// A clock that steps back is time that has not passed: no limiter admits
/// more than its state allows, the APPROX counter (which keeps counts per
/// fixed window) included, across a window boundary or far back.
#[test]
fn a_clock_that_steps_back_admits_no_more_anywhere() {
    let s = Server::start();
    let c = &mut s.conn();
    // T0 + 40 s is a multiple of 60 s: a fixed window starts there.
    step(&s, T0 + 50 * SEC);
    let calls = [
        "SW.ALLOW approx 5 60 APPROX",
        "SW.ALLOW exact 5 60",
        "FW.INCR fixed 5 60",
        "FW.INCR aligned 5 60 ALIGN",
        "CL.THROTTLE gcra 4 5 60",
    ];
    for line in calls {
        for i in 0..5 {
            assert_eq!(five(c, line)[0], 0, "{line} #{i}");
        }
        assert_eq!(five(c, line)[0], 1, "{line}: full");
    }
    for _ in 0..5 {
        cmd(c, "CC.ACQUIRE leases 5 60").unwrap();
    }
    let peeks = [
        "SW.PEEK approx 5 60 APPROX",
        "SW.PEEK exact 5 60",
        "FW.PEEK fixed 5 60",
        "FW.PEEK aligned 5 60 ALIGN",
        "CL.PEEK gcra 4 5 60",
        "CC.PEEK leases 5",
    ];
    // Back across the boundary, then far back.
    for back in [T0 + 30 * SEC, T0 - 3_600 * SEC] {
        step(&s, back);
        for line in calls {
            assert_eq!(five(c, line)[..3], [1, 5, 0], "{line} at {back}");
        }
        let (v, id) = match cmd(c, "CC.ACQUIRE leases 5 60").unwrap() {
            Value::Array(v) => (v[0].clone(), v[5].clone()),
            other => panic!("{other:?}"),
        };
        assert_eq!((v, id), (Value::Int(1), Value::Nil), "CC.ACQUIRE at {back}");
        for line in peeks {
            assert_eq!(five(c, line)[1..3], [5, 0], "{line} at {back}");
        }
    }
    // The APPROX counter decides as at the start of its window (T0 + 40 s)
    // and counts its waits from now: one request fits once 4 of the 5
    // weigh, 12 s into the window after.
    step(&s, T0 + 30 * SEC);
    assert_eq!(five(c, "SW.ALLOW approx 5 60 APPROX"), [1, 5, 0, 82, 130]);
    // Forward again: the counts are still there.
    step(&s, T0 + 60 * SEC);
    assert_eq!(five(c, "SW.ALLOW approx 5 60 APPROX"), [1, 5, 0, 52, 100]);
}

const OVERFLOW: &str = "ERR parameters out of range: their nanosecond arithmetic overflows 64 bits";

/// 30 s before the end of 64-bit nanoseconds (2262-04-11T23:46:46.854Z).
const LATE: i64 = i64::MAX - 30 * SEC;

/// At the end of 64-bit nanoseconds every limiter follows one rule: a call
/// whose arithmetic would reach past `i64::MAX` ns (a window, period or
/// lease starting now, or a state's expiry) answers the overflow error and
/// writes nothing; one that stays within it works as at any other time.
#[test]
fn the_end_of_64_bit_nanoseconds_is_one_rule_for_every_limiter() {
    let s = Server::start();
    let c = &mut s.conn();
    step(&s, LATE);
    // Within: the state is back to full exactly at i64::MAX ns, or before.
    let within = [
        ("CL.THROTTLE g 0 1 30", [0, 1, 0, -1, 30]),
        ("SW.ALLOW s 5 30", [0, 5, 4, -1, 30]),
        // Fixed windows of 10 s: this one ends 20 s from its start, at
        // 2262-04-11T23:47:00Z (the next one would end past the limit).
        ("SW.ALLOW a 5 10 APPROX", [0, 5, 4, -1, 14]),
        ("FW.INCR f 5 30", [0, 5, 4, -1, 30]),
        ("FW.INCR fa 5 30 ALIGN", [0, 5, 4, -1, 14]),
        ("FW.INCR fm 5 minute", [0, 5, 4, -1, 14]),
    ];
    for (line, want) in within {
        assert_eq!(five(c, line), want, "{line}");
    }
    let acquired = cmd(c, "CC.ACQUIRE l 5 30 ID x").unwrap();
    assert!(matches!(acquired, Value::Array(_)), "{acquired:?}");
    assert_eq!(pttl(c, "g"), 30_000);
    assert_eq!(pttl(c, "s"), 30_000);
    // The lease's expiry rounded up to the millisecond: never before it.
    assert_eq!(pttl(c, "l"), 30_001);
    assert_eq!(expire_time_ms(c, "a"), i64::MAX / MS - 16_854);
    // Past it, by as little as a nanosecond: refused, nothing written.
    let past = [
        "CL.THROTTLE g2 0 1 30.000000001",
        "CL.PEEK g2 0 1 31",
        "CL.RESERVE g2 0 1 31 MAXWAIT 1",
        "CL.REFUND g 0 1 31 1",
        "SW.ALLOW s2 5 30.000000001",
        "SW.PEEK s 5 31",
        "SW.REFUND s 5 31 1",
        "SW.ALLOW a2 5 20 APPROX",
        "FW.INCR f2 5 30.000000001",
        "FW.INCR fa2 5 40 ALIGN",
        "FW.INCR fh 5 hour",
        "FW.INCR fd 5 day TZ +09:00",
        "FW.PEEK f 5 31",
        "FW.REFUND f 5 31 1",
        "CC.ACQUIRE l2 5 30.000000001",
        "CC.ACQUIRE l 5 31 ID x",
        "CC.RENEW l x 31",
        "CL.THROTTLEALL 2 g3 s3 GCRA 0 1 1 SW 5 31",
    ];
    let keys: Vec<String> = ["g", "s", "a", "f", "fa", "fm", "l"]
        .map(String::from)
        .to_vec();
    let before = snapshot(c, &keys);
    for line in past {
        assert_eq!(err(c, line), OVERFLOW, "{line}");
    }
    assert_eq!(snapshot(c, &keys), before);
    for key in ["g2", "g3", "s2", "s3", "a2", "f2", "fa2", "fh", "fd", "l2"] {
        assert_eq!(
            cmd(c, &format!("EXISTS {key}")).unwrap(),
            Value::Int(0),
            "{key}"
        );
    }
    // The effects replicas replay follow the same rule.
    let late_ns = LATE.to_string();
    for line in [
        format!("SW.RECORD s4 {} {late_ns}", 31 * SEC),
        format!("SW.RECORD a4 {} {late_ns} APPROX", 20 * SEC),
        format!("SW.UNRECORD s {} {late_ns}", 31 * SEC),
    ] {
        assert_eq!(err(c, &line), OVERFLOW, "{line}");
    }
    // At the very last nanosecond nothing with a duration fits; a peek
    // of leases (no duration) and a release still answer (the lease taken
    // above ends at this instant).
    step(&s, i64::MAX);
    for line in [
        "CL.THROTTLE g4 0 1 0.000000001",
        "SW.ALLOW s4 5 0.000000001",
        "SW.ALLOW a4 5 0.000000001 APPROX",
        "FW.INCR f4 5 0.000000001",
        "CC.ACQUIRE l4 5 0.000000001",
    ] {
        assert_eq!(err(c, line), OVERFLOW, "{line}");
    }
    assert_eq!(five(c, "CC.PEEK l 5"), [0, 5, 5, -1, 0]);
    assert_eq!(cmd(c, "CC.RELEASE l x").unwrap(), Value::Int(0));
}
