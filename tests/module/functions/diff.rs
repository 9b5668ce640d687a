//! The Functions twin answers and stores exactly what the module does: a
//! long seeded random workload of every public command, each call made
//! through the module on a key and through the twin on its twin key at
//! the same instant of the test clock.
//!
//! `TWIN_SEED` replays one seed; `TWIN_STEPS` sets the workload's length.

use crate::twin;

use crate::support::*;
use crate::twin::diff::Pair;
use crate::twin::gen::{Gen, OTHER_TYPES};
use crate::twin::*;

/// Creates the keys of other types, for the module and for the twin.
pub fn other_types(c: &mut redis::Connection) {
    for line in OTHER_TYPES {
        let mut words = twin::words(line);
        cmd(c, line).unwrap();
        words[1] = twin_key(&words[1]);
        module_call(c, &words).unwrap();
    }
}

fn workload(seed: u64, steps: usize) {
    let s = Server::start();
    let c = &mut s.conn();
    // The server's background expiry deletes keys at random, among them
    // keys whose expiry is the current millisecond, which lookups still
    // see: it could delete one key of a pair and not the other. Lazy
    // expiry alone treats both alike.
    cmd(c, "DEBUG SET-ACTIVE-EXPIRE 0").unwrap();
    other_types(c);
    let mut pair = Pair::new(c, seed);
    let mut gen = Gen::new(seed);
    gen.sub_ms_windows = !server_version().valkey;
    let mut now = T0;
    let (mut errors, mut refused, mut allowed) = (0, 0, 0);
    for step in 0..steps {
        now = gen.step(now);
        s.set_time(now);
        pair.now = now;
        pair.step = step;
        let words = gen.call(12);
        match pair.check(c, &words) {
            Err(_) => errors += 1,
            Ok(Value::Array(v)) if v.first() == Some(&Value::Int(1)) => refused += 1,
            Ok(_) => allowed += 1,
        }
        gen.generated.clone_from(&pair.generated);
    }
    eprintln!("seed {seed:#x}: {allowed} allowed, {refused} refused, {errors} errors");
    // A workload that never decides is no proof.
    assert!(
        allowed > steps / 5 && refused > steps / 20 && errors > steps / 20,
        "workload too one-sided: {allowed} allowed, {refused} refused, {errors} errors"
    );
}

#[test]
fn random_workload_of_every_command_agrees() {
    let steps = env_u64("TWIN_STEPS").unwrap_or(6_000) as usize;
    match env_u64("TWIN_SEED") {
        Some(seed) => workload(seed, steps),
        None => {
            for seed in [0x5EED_0001, 0xC0FF_EE00_1234, 0x7717_2026] {
                workload(seed, steps);
            }
        }
    }
}

/// The common forms the twin serves on its flat paths (functions/src/fast.lua:
/// `CL.THROTTLE`, `FW.INCR` and `SW.ALLOW` with `[quantity] [MS]`, and
/// `CL.THROTTLEALL` of two keys, `GCRA ... FW ... [ALIGN]`), called often
/// enough on few keys to be allowed, refused and expired, with now and then
/// a state the flat paths leave to the layered one (a counter without TTL or
/// with leading zeros, a TAT that is no number, a TAT far from now): the
/// same replies and states as the module's.
fn flat_workload(seed: u64, steps: usize) {
    let s = Server::start();
    let c = &mut s.conn();
    cmd(c, "DEBUG SET-ACTIVE-EXPIRE 0").unwrap();
    let mut pair = Pair::new(c, seed);
    let mut gen = Gen::new(seed);
    let mut now = T0;
    let (mut refused, mut allowed) = (0, 0);
    let pick =
        |gen: &mut Gen, items: &[&str]| items[gen.below(items.len() as u64) as usize].to_string();
    for step in 0..steps {
        // Mostly small steps, so that states stay near now.
        now = if gen.pct(90) {
            now + gen.below(300_000) as i64 * 1_000
        } else {
            gen.step(now)
        };
        s.set_time(now);
        pair.now = now;
        pair.step = step;
        let i = gen.below(4);
        if gen.pct(2) {
            // A state for the layered path, on both sides.
            let (key, value, px) = match gen.below(5) {
                0 => (format!("fw:{i}"), "3".to_string(), None),
                1 => (format!("fw:{i}"), "007".to_string(), Some(30_000)),
                2 => (format!("{{t{i}}}b"), "01".to_string(), Some(30_000)),
                3 => (format!("cl:{i}"), "abc".to_string(), None),
                _ => (
                    format!("cl:{i}"),
                    (now + 3 * 86_400 * SEC).to_string(),
                    None,
                ),
            };
            for k in [key.as_bytes().to_vec(), twin_key(key.as_bytes())] {
                let mut set = redis::cmd("SET");
                set.arg(k).arg(&value);
                if let Some(ms) = px {
                    set.arg("PX").arg(ms);
                }
                set.query::<()>(c).unwrap();
            }
        }
        let mut words: Vec<String> = match gen.below(4) {
            0 => vec![
                "CL.THROTTLE".into(),
                format!("cl:{i}"),
                pick(&mut gen, &["0", "1", "3", "1000"]),
                pick(&mut gen, &["1", "2", "30"]),
                pick(&mut gen, &["1", "2", "60"]),
            ],
            1 => vec![
                "FW.INCR".into(),
                format!("fw:{i}"),
                pick(&mut gen, &["0", "1", "2", "5", "100"]),
                pick(&mut gen, &["1", "2", "60"]),
            ],
            2 => vec![
                "SW.ALLOW".into(),
                format!("sw:{i}"),
                pick(&mut gen, &["0", "1", "2", "5", "100"]),
                pick(&mut gen, &["1", "2", "60"]),
            ],
            _ => {
                let mut w = vec![
                    "CL.THROTTLEALL".into(),
                    "2".into(),
                    format!("{{t{i}}}a"),
                    format!("{{t{i}}}b"),
                    "GCRA".into(),
                    pick(&mut gen, &["0", "1", "3", "1000"]),
                    pick(&mut gen, &["1", "2", "30"]),
                    pick(&mut gen, &["1", "2", "60"]),
                    "FW".into(),
                    pick(&mut gen, &["0", "1", "2", "5", "100"]),
                    pick(&mut gen, &["1", "2", "60"]),
                ];
                if gen.pct(50) {
                    w.push("ALIGN".into());
                }
                w
            }
        };
        if words[0] != "CL.THROTTLEALL" {
            let mut options = Vec::new();
            if gen.pct(60) {
                options.push(pick(&mut gen, &["0", "1", "2", "5", "007"]));
            }
            if gen.pct(30) {
                options.push(pick(&mut gen, &["MS", "ms"]));
            }
            if gen.pct(50) {
                options.reverse();
            }
            words.extend(options);
        }
        let words: Vec<Vec<u8>> = words.into_iter().map(String::into_bytes).collect();
        match pair.check(c, &words) {
            Ok(Value::Array(v)) if v.first() == Some(&Value::Int(1)) => refused += 1,
            Ok(Value::Array(_)) => allowed += 1,
            _ => {}
        }
    }
    eprintln!("seed {seed:#x}: {allowed} allowed, {refused} refused");
    assert!(
        allowed > steps / 5 && refused > steps / 5,
        "workload too one-sided: {allowed} allowed, {refused} refused"
    );
}

#[test]
fn flat_paths_agree_with_the_module() {
    let steps = env_u64("TWIN_STEPS").unwrap_or(3_000) as usize;
    match env_u64("TWIN_SEED") {
        Some(seed) => flat_workload(seed, steps),
        None => {
            for seed in [0xF1A7_0001, 0xF1A7_2026] {
                flat_workload(seed, steps);
            }
        }
    }
}
