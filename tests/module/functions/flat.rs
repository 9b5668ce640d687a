//! The flat paths (functions/src/fast.lua) answer, store and expire what
//! the layered path does, on the twin's own states: each call is made
//! twice at one instant, on a key the flat path serves (a quantity in plain
//! digits) and on its twin key through the layered path (the same
//! quantity written `+N`, which the flat path leaves to it), and the
//! replies, the stored bytes and the expiries must be equal. Beside the
//! module diff (functions/diff.rs), this compares the exact log's bytes,
//! which are the twin's own, and a clock that steps back now and then.
//!
//! `TWIN_SEED` replays one seed; `TWIN_STEPS` sets the workload's length.

use crate::support::*;
use crate::twin::gen::Gen;
use crate::twin::*;

/// The key's value and absolute expiry (ms; -1 none, -2 no key).
fn state(c: &mut redis::Connection, key: &str) -> (Option<Vec<u8>>, i64) {
    let v: Option<Vec<u8>> = redis::cmd("GET").arg(key).query(c).unwrap();
    let pttl: i64 = redis::cmd("PTTL").arg(key).query(c).unwrap();
    let exp = if pttl < 0 {
        pttl
    } else {
        // PEXPIRETIME is 7.0+; on 6.2 compare what is left (both keys
        // are read at one instant of the test clock).
        redis::cmd("PEXPIRETIME")
            .arg(key)
            .query::<i64>(c)
            .unwrap_or(pttl)
    };
    (v, exp)
}

fn workload(seed: u64, steps: usize) {
    let s = Server::with(Options {
        without_module: true,
        ..Options::default()
    });
    let c = &mut s.conn();
    let t = Twin::load(c);
    // Lazy expiry alone: the server's background expiry could delete one
    // key of a pair in its last millisecond and not the other.
    cmd(c, "DEBUG SET-ACTIVE-EXPIRE 0").unwrap();
    let mut gen = Gen::new(seed);
    let mut now = T0;
    let (mut refused, mut allowed, mut back) = (0, 0, 0);
    let pick =
        |gen: &mut Gen, items: &[&str]| items[gen.below(items.len() as u64) as usize].to_string();
    for step in 0..steps {
        now = if gen.pct(5) {
            // A clock that steps back (a failover, a corrected clock).
            back += 1;
            now - gen.below(3_000_000) as i64 * 1_000
        } else if gen.pct(90) {
            now + gen.below(400_000) as i64 * 1_000
        } else {
            gen.step(now)
        };
        s.set_time(now);
        let i = gen.below(3);
        let (command, params) = match gen.below(3) {
            0 => (
                "SW.ALLOW",
                vec![
                    pick(&mut gen, &["0", "1", "2", "5", "12"]),
                    pick(&mut gen, &["1", "2", "0.5", "1.25", "60"]),
                ],
            ),
            1 => (
                "FW.INCR",
                vec![
                    pick(&mut gen, &["0", "1", "2", "5", "12"]),
                    pick(&mut gen, &["1", "2", "0.5", "1.25", "60"]),
                ],
            ),
            _ => (
                "CL.THROTTLE",
                vec![
                    pick(&mut gen, &["0", "1", "3", "10"]),
                    pick(&mut gen, &["1", "2", "30"]),
                    pick(&mut gen, &["1", "2", "60"]),
                ],
            ),
        };
        let q = pick(&mut gen, &["0", "1", "1", "1", "2", "5", "13"]);
        let ms = gen.pct(30);
        let call = |key: &str, q: String| {
            let mut w = vec![command.to_string(), key.to_string()];
            w.extend(params.iter().cloned());
            w.push(q);
            if ms {
                w.push("MS".to_string());
            }
            w.into_iter().map(String::into_bytes).collect::<Vec<_>>()
        };
        let (flat_key, layered_key) = (format!("{command}:f{i}"), format!("{command}:l{i}"));
        let flat = call(&flat_key, q.clone());
        let layered = call(&layered_key, format!("+{q}"));
        let a = t.call(c, &flat);
        let b = t.call(c, &layered);
        assert_eq!(
            a,
            b,
            "seed {seed:#x} step {step}: {} and {} answer differently",
            show(&flat),
            show(&layered)
        );
        assert_eq!(
            state(c, &flat_key),
            state(c, &layered_key),
            "seed {seed:#x} step {step}: {} and {} store differently",
            show(&flat),
            show(&layered)
        );
        match a {
            Ok(Value::Array(v)) if v.first() == Some(&Value::Int(1)) => refused += 1,
            Ok(Value::Array(_)) => allowed += 1,
            other => panic!("seed {seed:#x} step {step}: {}: {other:?}", show(&flat)),
        }
    }
    eprintln!("seed {seed:#x}: {allowed} allowed, {refused} refused, {back} steps back");
    assert!(
        allowed > steps / 5 && refused > steps / 5 && back > steps / 50,
        "workload too one-sided: {allowed} allowed, {refused} refused, {back} steps back"
    );
}

#[test]
fn flat_paths_store_and_answer_as_the_layered_path() {
    let steps = env_u64("TWIN_STEPS").unwrap_or(3_000) as usize;
    match env_u64("TWIN_SEED") {
        Some(seed) => workload(seed, steps),
        None => {
            for seed in [0xF1A7_F1A7, 0x1A7E_2026] {
                workload(seed, steps);
            }
        }
    }
}
