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
