//! The wall clock stepping back, and the end of 64-bit nanoseconds (the
//! year 2262): one rule for every limiter each time.

mod support;
use support::*;

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
