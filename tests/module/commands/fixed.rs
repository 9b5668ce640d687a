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

/// `COUNTALL`: every hit counted as INCRBY counts it, refused or not, with
/// the verdict against the limit given; the operator sees the refusals.
#[test]
fn countall_counts_every_hit_and_reports_the_refused() {
    let s = Server::start();
    s.set_time(M0 + 10 * SEC);
    let c = &mut s.conn();
    let mut replies = Vec::new();
    for _ in 0..15 {
        replies.push(five(c, "FW.INCR hits 10 60 COUNTALL"));
    }
    assert_eq!(replies[0], [0, 10, 9, -1, 60]);
    assert_eq!(replies[9], [0, 10, 0, -1, 60]);
    assert_eq!(replies[10], [1, 10, -1, 60, 60]);
    assert_eq!(replies[14], [1, 10, -5, 60, 60]);
    // What INCRBY and an EXPIRE at the first hit leave.
    assert_eq!(get(c, "hits").as_deref(), Some("15"));
    assert_eq!(pttl(c, "hits"), 60_000);
    assert_eq!(info_field(c, "fw_incr_limited"), 5);
    assert_eq!(info_field(c, "fw_incr_allowed"), 10);
    assert_eq!(top(c, "CL.TOP"), [("hits".to_string(), 5, 0, 0)]);
    // The peek answers the count over the limit and writes nothing.
    s.set_time(M0 + 40 * SEC);
    assert_eq!(five(c, "FW.PEEK hits 10 60 COUNTALL"), [1, 10, -5, 30, 30]);
    assert_eq!(five(c, "FW.PEEK hits 10 60"), [1, 10, 0, 30, 30]);
    // More than the limit at once never fits, and is counted.
    assert_eq!(
        five(c, "FW.INCR hits 10 60 11 COUNTALL"),
        [1, 10, -16, -1, 30]
    );
    assert_eq!(get(c, "hits").as_deref(), Some("26"));
    // Without COUNTALL the same key refuses without counting.
    assert_eq!(five(c, "FW.INCR hits 10 60"), [1, 10, 0, 30, 30]);
    assert_eq!(get(c, "hits").as_deref(), Some("26"));
    // A refund gives back below the limit again.
    assert_eq!(
        five(c, "FW.REFUND hits 10 60 20 COUNTALL"),
        [0, 10, 4, -1, 30]
    );
    // The window ends where the first hit put it.
    s.set_time(M0 + 70 * SEC);
    assert_eq!(five(c, "FW.INCR hits 10 60 countall"), [0, 10, 9, -1, 60]);
    // Limit 0 refuses and counts every hit; quantity 0 counts nothing.
    assert_eq!(five(c, "FW.INCR zero 0 60 COUNTALL 2"), [1, 0, -2, -1, 60]);
    assert_eq!(five(c, "FW.INCR zero 0 60 0 COUNTALL"), [1, 0, -2, -1, 60]);
    assert_eq!(get(c, "zero").as_deref(), Some("2"));
    assert_eq!(
        err(c, "FW.INCR k 1 60 COUNTALL COUNTALL"),
        "ERR COUNTALL given twice"
    );
}

/// In `CL.THROTTLEALL` a `COUNTALL` window counts the hit even when
/// another limiter refuses the call; the others write only when all allow.
#[test]
fn countall_in_throttleall_counts_refused_calls() {
    let s = Server::start();
    s.set_time(M0);
    let c = &mut s.conn();
    let line = "CL.THROTTLEALL 2 {u}fw {u}sw FW 5 60 COUNTALL SW 1 60";
    assert_eq!(six(c, line), [0, 1, 0, -1, 60, 2]);
    // Refused by the sliding window: counted by the counting window only.
    assert_eq!(six(c, line), [1, 1, 0, 60, 60, 2]);
    assert_eq!(get(c, "{u}fw").as_deref(), Some("2"));
    assert_eq!(five(c, "SW.PEEK {u}sw 1 60"), [0, 1, 0, -1, 60]);
    // The same with a plain fixed window writes nothing when refused.
    let plain = "CL.THROTTLEALL 2 {v}fw {v}sw FW 5 60 SW 1 60";
    cmd(c, plain).unwrap();
    cmd(c, plain).unwrap();
    assert_eq!(get(c, "{v}fw").as_deref(), Some("1"));
}

/// `POLICY name` on the single-limiter commands: the policy's limiter when
/// it exists (as CL.LIMIT), the call's own numbers when it does not.
#[test]
fn policy_option_uses_the_policy_or_falls_back() {
    let s = Server::start();
    s.set_time(M0);
    let c = &mut s.conn();
    // No such policy: the call's own numbers, counted for no policy.
    assert_eq!(
        five(c, "FW.INCR login:1 3 60 POLICY login COUNTALL"),
        [0, 3, 2, -1, 60]
    );
    assert_eq!(
        five(c, "FW.PEEK login:1 3 60 POLICY login"),
        [0, 3, 2, -1, 60]
    );
    ok(c, "CL.POLICY SET login FW 1 60");
    // Now the policy decides, keeping the call's COUNTALL.
    assert_eq!(
        five(c, "FW.INCR login:1 3 60 POLICY login COUNTALL"),
        [1, 1, -1, 60, 60]
    );
    assert_eq!(get(c, "login:1").as_deref(), Some("2"));
    assert_eq!(
        five(c, "FW.PEEK login:1 3 60 POLICY login COUNTALL"),
        [1, 1, -1, 60, 60]
    );
    assert_eq!(policy_counter(c, "login", "calls"), 1);
    assert_eq!(policy_counter(c, "login", "refused"), 1);
    assert_eq!(
        top(c, "CL.TOP POLICY login"),
        [("login:1".to_string(), 1, 0, 0)]
    );
    // A trial runs beside it, as with CL.LIMIT.
    ok(c, "CL.POLICY SET login FW 5 60 TRIAL FW 1 60");
    five(c, "FW.INCR login:2 3 60 POLICY login COUNTALL");
    five(c, "FW.INCR login:2 3 60 POLICY login COUNTALL");
    assert_eq!(policy_counter(c, "login", "trial_refused"), 1);
    assert_eq!(
        top(c, "CL.TOP POLICY login TRIAL"),
        [("login:2".to_string(), 1, 0, 1)]
    );
    // GCRA and sliding windows alike.
    ok(c, "CL.POLICY SET api GCRA 0 1 60");
    assert_eq!(
        five(c, "CL.THROTTLE api:1 9 9 60 POLICY api"),
        [0, 1, 0, -1, 60]
    );
    assert_eq!(
        five(c, "CL.THROTTLE api:1 9 9 60 POLICY api"),
        [1, 1, 0, 60, 60]
    );
    assert_eq!(
        five(c, "CL.PEEK api:1 9 9 60 POLICY api"),
        five(c, "CL.PEEK api:1 0 1 60")
    );
    ok(c, "CL.POLICY SET sw SW 1 60");
    assert_eq!(five(c, "SW.ALLOW sw:1 9 60 POLICY sw"), [0, 1, 0, -1, 60]);
    assert_eq!(five(c, "SW.ALLOW sw:1 9 60 POLICY sw"), [1, 1, 0, 60, 60]);
    // SHADOW with the call: refusals answered as allowed, counted so.
    assert_eq!(
        five(c, "SW.ALLOW sw:1 9 60 SHADOW POLICY sw"),
        [0, 1, 0, -1, 60]
    );
    assert_eq!(policy_counter(c, "sw", "shadow_refused"), 1);
    // A policy of another kind would read the key as another state.
    assert_eq!(
        err(c, "FW.INCR login:1 3 60 POLICY api"),
        "ERR policy 'api' holds a GCRA limiter, not the FW of this command"
    );
    assert_eq!(
        err(c, "SW.ALLOW sw:2 3 60 APPROX POLICY sw"),
        "ERR policy 'sw' holds a SW limiter, not the SW APPROX of this command"
    );
    assert_eq!(err(c, "FW.INCR k 3 60 POLICY"), "ERR POLICY needs a value");
    // The call's own parameters are checked whatever the policy.
    assert_eq!(
        err(c, "FW.INCR k -3 60 POLICY login"),
        err(c, "FW.INCR k -3 60")
    );
}
