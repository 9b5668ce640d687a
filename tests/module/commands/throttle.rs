//! CL.THROTTLE and CL.PEEK against a real server with a controlled clock.

use crate::support::*;

#[test]
fn reference_transcript_on_a_frozen_clock() {
    let s = Server::start();
    let c = &mut s.conn();
    assert_eq!(five(c, "CL.THROTTLE fk 2 1 10"), [0, 3, 2, -1, 10]);
    assert_eq!(five(c, "CL.THROTTLE fk 2 1 10"), [0, 3, 1, -1, 20]);
    assert_eq!(five(c, "CL.THROTTLE fk 2 1 10"), [0, 3, 0, -1, 30]);
    assert_eq!(five(c, "CL.THROTTLE fk 2 1 10"), [1, 3, 0, 10, 30]);
    assert_eq!(get(c, "fk").as_deref(), Some("1700000030000000000"));
    assert_eq!(pttl(c, "fk"), 30000);
    s.set_time(T0 + 9_999 * MS);
    assert_eq!(five(c, "CL.THROTTLE fk 2 1 10"), [1, 3, 0, 1, 21]);
    s.set_time(T0 + 10 * SEC);
    assert_eq!(five(c, "CL.THROTTLE fk 2 1 10"), [0, 3, 0, -1, 30]);
    assert_eq!(get(c, "fk").as_deref(), Some("1700000040000000000"));
    s.set_time(T0 + 40 * SEC + 1);
    assert_eq!(five(c, "CL.THROTTLE fk 2 1 10"), [0, 3, 2, -1, 10]);
    assert_eq!(get(c, "fk").as_deref(), Some("1700000050000000001"));
}

#[test]
fn burst_zero_burst_and_quantities() {
    let s = Server::start();
    let c = &mut s.conn();
    for i in 1..=16 {
        assert_eq!(
            five(c, "CL.THROTTLE user123 15 30 60 1"),
            [0, 16, 16 - i, -1, 2 * i]
        );
    }
    for _ in 0..4 {
        assert_eq!(five(c, "CL.THROTTLE user123 15 30 60 1"), [1, 16, 0, 2, 32]);
    }
    assert_eq!(five(c, "CL.THROTTLE k 0 1 1"), [0, 1, 0, -1, 1]);
    assert_eq!(five(c, "CL.THROTTLE k 0 1 1"), [1, 1, 0, 1, 1]);
    assert_eq!(five(c, "CL.THROTTLE q0 15 30 60 0"), [0, 16, 16, -1, 0]);
    assert_eq!(five(c, "CL.THROTTLE q16 15 30 60 16"), [0, 16, 0, -1, 32]);
    for q in [17, 100] {
        assert_eq!(
            five(c, &format!("CL.THROTTLE q{q} 15 30 60 {q}")),
            [1, 16, 16, -1, 0]
        );
        assert_eq!(
            get(c, &format!("q{q}")),
            None,
            "a refused request writes nothing"
        );
    }
}

#[test]
fn the_key_expires_when_the_bucket_is_full_again() {
    let s = Server::start();
    let c = &mut s.conn();
    five(c, "CL.THROTTLE e 4 1 2");
    five(c, "CL.THROTTLE e 4 1 2");
    assert_eq!(pttl(c, "e"), 4000);
    s.set_time(T0 + 4 * SEC + MS);
    assert_eq!(get(c, "e"), None);
    assert_eq!(five(c, "CL.THROTTLE e 4 1 2"), [0, 5, 4, -1, 2]);
}

#[test]
fn decimal_periods_give_sub_second_limits() {
    let s = Server::start();
    let c = &mut s.conn();
    // 2 per half second, burst 1: the third call in the same instant waits 250 ms.
    assert_eq!(five(c, "CL.THROTTLE d 1 2 0.5"), [0, 2, 1, -1, 1]);
    assert_eq!(five(c, "CL.THROTTLE d 1 2 0.5"), [0, 2, 0, -1, 1]);
    assert_eq!(five(c, "CL.THROTTLE d 1 2 0.5"), [1, 2, 0, 1, 1]);
    s.set_time(T0 + 250 * MS);
    assert_eq!(five(c, "CL.THROTTLE d 1 2 0.5"), [0, 2, 0, -1, 1]);
    assert_eq!(get(c, "d").as_deref(), Some("1700000000750000000"));
}

#[test]
fn peek_answers_like_quantity_zero_and_never_writes() {
    let s = Server::start();
    let c = &mut s.conn();
    assert_eq!(five(c, "CL.PEEK p 15 30 60"), [0, 16, 16, -1, 0]);
    assert_eq!(get(c, "p"), None);
    five(c, "CL.THROTTLE p 15 30 60 3");
    let before = (get(c, "p"), pttl(c, "p"));
    s.set_time(T0 + SEC);
    assert_eq!(five(c, "CL.PEEK p 15 30 60"), [0, 16, 13, -1, 5]);
    assert_eq!(five(c, "CL.THROTTLE p 15 30 60 0"), [0, 16, 13, -1, 5]);
    assert_eq!(get(c, "p"), before.0);
    if !server_version().has_7_0() {
        return; // EVAL_RO came with Redis 7.0
    }
    let ro: Value = redis::cmd("EVAL_RO")
        .arg("return redis.call('CL.PEEK', KEYS[1], 15, 30, 60)")
        .arg(1)
        .arg("p")
        .query(c)
        .unwrap();
    assert_eq!(
        ro,
        Value::Array([0, 16, 13, -1, 5].map(Value::Int).to_vec())
    );
}

#[test]
fn state_written_by_the_original_module_is_read_as_is() {
    let s = Server::start();
    let c = &mut s.conn();
    // The original stores the TAT as decimal nanoseconds with a PX expiry.
    cmd(c, "SET orig 1700000020000000000 PX 20000").unwrap();
    assert_eq!(five(c, "CL.THROTTLE orig 2 1 10"), [0, 3, 0, -1, 30]);
    assert_eq!(get(c, "orig").as_deref(), Some("1700000030000000000"));
}

#[test]
fn registration_flags_and_key_positions() {
    let s = Server::start();
    let c = &mut s.conn();
    let keys: Vec<String> = redis::cmd("COMMAND")
        .arg("GETKEYS")
        .arg("CL.THROTTLE")
        .arg("user:1")
        .arg(1)
        .arg(2)
        .arg(3)
        .query(c)
        .unwrap();
    assert_eq!(keys, ["user:1"]);
    let info = format!("{:?}", cmd(c, "COMMAND INFO cl.throttle cl.peek").unwrap());
    for flag in ["write", "denyoom", "fast", "readonly"] {
        assert!(info.contains(flag), "{flag} missing from {info}");
    }
}
