//! The module reads the wall clock itself (`clock_gettime`), once per
//! command; the server has its own notion of now for TTLs and expiry
//! (Valkey 9 reads the wall clock at most once a millisecond and advances
//! it with the processor's counter in between). On the real clock the two
//! must agree: this measures by how much they can differ.

use crate::support::*;

/// `TIME`, a throttle whose stored TAT reveals the module's instant, and
/// `TIME` again, each a command of its own (each server command reads the
/// server's clock afresh): the module's instant must fall between the
/// server's two readings, up to the measured slack.
#[test]
fn the_module_and_the_server_agree_on_the_time() {
    let s = Server::with(Options {
        real_clock: true,
        ..Options::default()
    });
    let c = &mut s.conn();
    let (mut early, mut late) = (0i64, 0i64);
    for i in 0..2_000 {
        let key = format!("clock:{i}");
        // One request of a 1000 s emission interval: TAT = now + 1000 s.
        let ((s1, u1), _, (s2, u2)): ((i64, i64), Value, (i64, i64)) = redis::pipe()
            .cmd("TIME")
            .cmd("CL.THROTTLE")
            .arg(&key)
            .arg(0)
            .arg(1)
            .arg(1000)
            .cmd("TIME")
            .query(c)
            .unwrap();
        let tat: i64 = get(c, &key).unwrap().parse().unwrap();
        let module_us = (tat - 1000 * SEC) / 1000;
        let (before, after) = (s1 * 1_000_000 + u1, s2 * 1_000_000 + u2);
        // How far the module's instant lies outside [before, after].
        early = early.max(before - module_us);
        late = late.max(module_us - after);
    }
    println!(
        "{:?}: the server's clock ran up to {early} us ahead of the module's, {late} us behind",
        server_version()
    );
    assert!(
        early <= 1_000 && late <= 1_000,
        "clocks differ by more than 1 ms: {early} us early, {late} us late"
    );
}
