//! SW.ALLOW against a real server with a controlled clock.

use crate::support::*;

#[test]
fn entries_leave_the_window_exactly_at_t_plus_window() {
    let s = Server::start();
    let c = &mut s.conn();
    assert_eq!(five(c, "SW.ALLOW u 2 10"), [0, 2, 1, -1, 10]);
    s.set_time(T0 + 4 * SEC);
    assert_eq!(five(c, "SW.ALLOW u 2 10"), [0, 2, 0, -1, 10]);
    s.set_time(T0 + 5 * SEC);
    assert_eq!(five(c, "SW.ALLOW u 2 10"), [1, 2, 0, 5, 9]);
    s.set_time(T0 + 10 * SEC - MS);
    assert_eq!(five(c, "SW.ALLOW u 2 10"), [1, 2, 0, 1, 5]);
    s.set_time(T0 + 10 * SEC);
    assert_eq!(five(c, "SW.ALLOW u 2 10"), [0, 2, 0, -1, 10]);
}

#[test]
fn weighted_requests_peeks_and_limit_zero() {
    let s = Server::start();
    let c = &mut s.conn();
    assert_eq!(five(c, "SW.ALLOW w 10 60 4"), [0, 10, 6, -1, 60]);
    s.set_time(T0 + 10 * SEC);
    assert_eq!(five(c, "SW.ALLOW w 10 60 3"), [0, 10, 3, -1, 60]);
    s.set_time(T0 + 20 * SEC);
    assert_eq!(five(c, "SW.ALLOW w 10 60 3"), [0, 10, 0, -1, 60]);
    s.set_time(T0 + 30 * SEC);
    assert_eq!(five(c, "SW.ALLOW w 10 60 5"), [1, 10, 0, 40, 50]);
    assert_eq!(five(c, "SW.ALLOW w 10 60 11"), [1, 10, 0, -1, 50]);
    assert_eq!(five(c, "SW.ALLOW w 10 60 0"), [0, 10, 0, -1, 50]);
    s.set_time(T0 + 70 * SEC);
    assert_eq!(five(c, "SW.ALLOW w 10 60 5"), [0, 10, 2, -1, 60]);
    assert_eq!(five(c, "SW.ALLOW z 0 60"), [1, 0, 0, -1, 0]);
    assert_eq!(five(c, "SW.ALLOW fresh 5 60 0"), [0, 5, 5, -1, 0]);
    assert_eq!(
        cmd(c, "EXISTS z fresh").unwrap(),
        Value::Int(0),
        "nothing recorded"
    );
}

#[test]
fn decimal_windows_and_option_order() {
    let s = Server::start();
    let c = &mut s.conn();
    assert_eq!(five(c, "SW.ALLOW d 2 0.5 2"), [0, 2, 0, -1, 1]);
    s.set_time(T0 + 499 * MS);
    assert_eq!(five(c, "SW.ALLOW d 2 0.5 1"), [1, 2, 0, 1, 1]);
    s.set_time(T0 + 500 * MS);
    assert_eq!(five(c, "SW.ALLOW d 2 0.5 1"), [0, 2, 1, -1, 1]);
    assert_eq!(
        five(c, "SW.ALLOW ap 3 10 APPROX 2"),
        five(c, "SW.ALLOW ap2 3 10 2 approx")
    );
}

#[test]
fn the_key_expires_when_its_newest_entry_leaves() {
    let s = Server::start();
    let c = &mut s.conn();
    five(c, "SW.ALLOW e 5 10");
    s.set_time(T0 + 3 * SEC);
    five(c, "SW.ALLOW e 5 10");
    assert_eq!(pttl(c, "e"), 10_000);
    s.set_time(T0 + 13 * SEC + MS);
    assert_eq!(cmd(c, "EXISTS e").unwrap(), Value::Int(0));
}

#[test]
fn the_type_behaves_like_a_redis_type() {
    let s = Server::start();
    let c = &mut s.conn();
    five(c, "SW.ALLOW t 5 10 2");
    assert_eq!(
        cmd(c, "TYPE t").unwrap(),
        Value::SimpleString("cell-swin".into())
    );
    let wrongtype = "WRONGTYPE Operation against a key holding the wrong kind of value";
    assert_eq!(err(c, "GET t"), wrongtype);
    assert_eq!(err(c, "LPUSH t x"), wrongtype);
    assert_eq!(err(c, "CL.THROTTLE t 1 1 1"), wrongtype);
    assert_eq!(err(c, "FW.INCR t 1 1"), wrongtype);
    cmd(c, "RENAME t t2").unwrap();
    assert_eq!(five(c, "SW.ALLOW t2 5 10 0"), [0, 5, 3, -1, 10]);
    cmd(c, "COPY t2 t3").unwrap();
    assert_eq!(five(c, "SW.ALLOW t3 5 10 3"), [0, 5, 0, -1, 10]);
    assert_eq!(
        five(c, "SW.ALLOW t2 5 10 0"),
        [0, 5, 3, -1, 10],
        "a copy is independent"
    );
    cmd(c, "EXPIRE t2 100").unwrap();
    assert_eq!(cmd(c, "TTL t2").unwrap(), Value::Int(100));
    cmd(c, "DEL t2").unwrap();
    assert_eq!(five(c, "SW.ALLOW t2 5 10 0"), [0, 5, 5, -1, 0]);
    let dump: Vec<u8> = redis::cmd("DUMP").arg("t3").query(c).unwrap();
    redis::cmd("RESTORE")
        .arg("t4")
        .arg(0)
        .arg(dump)
        .query::<()>(c)
        .unwrap();
    assert_eq!(five(c, "SW.ALLOW t4 5 10 0"), [0, 5, 0, -1, 10]);
}

#[test]
fn memory_per_recorded_request() {
    let s = Server::start();
    let c = &mut s.conn();
    for limit in [1_000i64, 100_000] {
        let key = format!("mem{limit}");
        let step = 60 * SEC / limit;
        // A full window of requests spread evenly, recorded at explicit
        // times (what replicas receive), then checked through SW.ALLOW.
        let mut p = redis::pipe();
        for i in 0..limit {
            p.cmd("SW.RECORD")
                .arg(&key)
                .arg(60 * SEC)
                .arg(T0 + i * step)
                .arg(1)
                .ignore();
        }
        p.query::<()>(c).unwrap();
        s.set_time(T0 + (limit - 1) * step);
        assert_eq!(
            five(c, &format!("SW.ALLOW {key} {limit} 60"))[0],
            1,
            "log is full"
        );
        let bytes: i64 = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(&key)
            .query(c)
            .unwrap();
        let per = bytes as f64 / limit as f64;
        println!("limit {limit}: MEMORY USAGE {bytes} bytes, {per:.2} per request");
        assert!(per <= 8.0, "limit {limit}: {per:.2} bytes per request");
    }
}
