//! The `CL.TOP` summaries take bounded memory whatever the keys' lengths,
//! say so in `INFO`, and are emptied by `FLUSHALL`: long refused keys
//! neither evict an application's keys nor make the server answer OOM.

use crate::support::*;

#[test]
fn long_refused_keys_take_bounded_memory_and_evict_nothing() {
    let s = Server::with(Options {
        config: vec![
            ("maxmemory".into(), "200mb".into()),
            ("maxmemory-policy".into(), "allkeys-lru".into()),
        ],
        ..Options::default()
    });
    let c = &mut s.conn();
    let mut fill = redis::pipe();
    for i in 0..40_000 {
        fill.cmd("SET").arg(format!("app:{i}")).arg("v").ignore();
    }
    fill.query::<()>(c).unwrap();
    for p in ["p1", "p2", "p3"] {
        cmd(c, &format!("CL.POLICY SET {p} FW 0 60")).unwrap();
    }
    let before = info_value(c, "memory", "used_memory");
    let worst = info_value(c, "redis-cell_policies", "redis-cell_top_memory_max_bytes");
    // 1024 refusals of distinct 32 KB keys through three policies: four
    // summaries of 1024 keys each, full.
    for batch in 0..8 {
        let mut p = redis::pipe();
        for i in 0..128 {
            let mut key = vec![b'k'; 32 * 1024];
            key.extend_from_slice(format!(":{batch}:{i}").as_bytes());
            for policy in ["p1", "p2", "p3"] {
                p.cmd("CL.LIMIT").arg(&key).arg(policy).ignore();
            }
        }
        p.query::<()>(c).unwrap();
    }
    let used = info_value(c, "redis-cell_policies", "redis-cell_top_memory_bytes");
    assert!(used > 0, "the refusals were tracked");
    assert!(used <= worst, "{used} > {worst}");
    // The documented bound: (1 + policies) x capacity x 761 bytes.
    assert_eq!(worst, 4 * 1024 * 761);
    let after = info_value(c, "memory", "used_memory");
    assert!(
        after < before + 8 * 1024 * 1024,
        "used_memory grew from {before} to {after}"
    );
    assert_eq!(info_value(c, "stats", "evicted_keys"), 0);
    assert_eq!(cmd(c, "DBSIZE"), Ok(redis::Value::Int(40_000)));
    // A long key is reported shortened: its head, `...`, a hash.
    let redis::Value::Array(top) = cmd(c, "CL.TOP COUNT 1").unwrap() else {
        panic!("CL.TOP answers an array")
    };
    let reported = format!("{top:?}");
    assert!(reported.contains("..."), "{reported}");
    // FLUSHALL forgets the keys, and so the summaries.
    cmd(c, "FLUSHALL").unwrap();
    assert_eq!(
        info_value(c, "redis-cell_policies", "redis-cell_top_memory_bytes"),
        0
    );
    assert_eq!(cmd(c, "CL.TOP"), Ok(redis::Value::Array(vec![])));
}
