//! FW.INCR against a real server with a controlled clock.

use crate::support::*;

/// A multiple of 60 s, so aligned windows start here.
const M0: i64 = 1_700_000_040 * SEC;

#[test]
fn window_starts_at_the_first_allowed_request() {
    let s = Server::start();
    s.set_time(M0 + 10 * SEC);
    let c = &mut s.conn();
    assert_eq!(five(c, "FW.INCR f 3 60"), [0, 3, 2, -1, 60]);
    s.set_time(M0 + 20 * SEC);
    assert_eq!(five(c, "FW.INCR f 3 60 2"), [0, 3, 0, -1, 50]);
    assert_eq!(get(c, "f").as_deref(), Some("3"));
    assert_eq!(pttl(c, "f"), 50_000);
    s.set_time(M0 + 30 * SEC);
    assert_eq!(five(c, "FW.INCR f 3 60"), [1, 3, 0, 40, 40]);
    assert_eq!(five(c, "FW.INCR f 3 60 4"), [1, 3, 0, -1, 40]);
    assert_eq!(five(c, "FW.INCR f 3 60 0"), [0, 3, 0, -1, 40]);
    assert_eq!(get(c, "f").as_deref(), Some("3"), "refusals change nothing");
    s.set_time(M0 + 70 * SEC);
    assert_eq!(five(c, "FW.INCR f 3 60"), [0, 3, 2, -1, 60]);
}

#[test]
fn aligned_windows_share_boundaries() {
    let s = Server::start();
    s.set_time(M0 + 45 * SEC);
    let c = &mut s.conn();
    assert_eq!(five(c, "FW.INCR a 2 60 ALIGN"), [0, 2, 1, -1, 15]);
    assert_eq!(five(c, "FW.INCR b 2 60 1 align"), [0, 2, 1, -1, 15]);
    s.set_time(M0 + 50 * SEC);
    assert_eq!(five(c, "FW.INCR a 2 60 ALIGN"), [0, 2, 0, -1, 10]);
    s.set_time(M0 + 60 * SEC - MS);
    assert_eq!(five(c, "FW.INCR a 2 60 ALIGN"), [1, 2, 0, 1, 1]);
    s.set_time(M0 + 60 * SEC);
    assert_eq!(five(c, "FW.INCR a 2 60 ALIGN"), [0, 2, 1, -1, 60]);
}

#[test]
fn counters_from_the_incr_expire_pattern() {
    let s = Server::start();
    let c = &mut s.conn();
    cmd(c, "INCR legacy").unwrap();
    cmd(c, "INCR legacy").unwrap();
    cmd(c, "EXPIRE legacy 30").unwrap();
    assert_eq!(five(c, "FW.INCR legacy 5 60"), [0, 5, 2, -1, 30]);
    assert_eq!(get(c, "legacy").as_deref(), Some("3"));
    assert_eq!(pttl(c, "legacy"), 30_000);
    // A counter left without a TTL gets one, even when the call is refused.
    cmd(c, "SET stuck 9").unwrap();
    assert_eq!(five(c, "FW.INCR stuck 5 60"), [1, 5, 0, 60, 60]);
    assert_eq!(pttl(c, "stuck"), 60_000);
    s.set_time(T0 + 60 * SEC);
    assert_eq!(five(c, "FW.INCR stuck 5 60"), [0, 5, 4, -1, 60]);
}

#[test]
fn limit_zero_and_peeks_write_nothing() {
    let s = Server::start();
    let c = &mut s.conn();
    assert_eq!(five(c, "FW.INCR z 0 60"), [1, 0, 0, -1, 0]);
    assert_eq!(five(c, "FW.INCR p 5 60 0"), [0, 5, 5, -1, 0]);
    assert_eq!(cmd(c, "EXISTS z p").unwrap(), Value::Int(0));
}
