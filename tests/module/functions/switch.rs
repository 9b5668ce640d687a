//! Switching engines keeps every limit: the same CL and FW keys driven by
//! the module and by the Functions twin in random alternation answer
//! exactly what the module alone answers on reference keys, and hold the
//! same state.

use crate::twin;

use crate::support::*;
use crate::twin::gen::Gen;
use crate::twin::*;

/// The reference key of `key`, driven by the module only.
fn reference(key: &[u8]) -> Vec<u8> {
    let mut k = b"ref:".to_vec();
    k.extend_from_slice(key);
    k
}

/// Type, value and PTTL of a key (a plain string: TAT or counter).
fn state(c: &mut redis::Connection, key: &[u8]) -> (String, Option<Vec<u8>>, i64) {
    let kind: String = redis::cmd("TYPE").arg(key).query(c).unwrap();
    let value = if kind == "string" {
        redis::cmd("GET").arg(key).query(c).unwrap()
    } else {
        None
    };
    (kind, value, redis::cmd("PTTL").arg(key).query(c).unwrap())
}

fn switching(seed: u64, steps: usize) {
    let s = Server::start();
    let c = &mut s.conn();
    // The server's background expiry deletes keys at random, among them
    // keys in their expiry millisecond, which lookups still see: it could
    // delete a switching key and not its reference. Lazy expiry alone
    // treats both alike.
    cmd(c, "DEBUG SET-ACTIVE-EXPIRE 0").unwrap();
    for line in twin::gen::OTHER_TYPES {
        cmd(c, line).unwrap();
        let mut w = twin::words(line);
        w[1] = reference(&w[1]);
        module_call(c, &w).unwrap();
    }
    let twin = Twin::load(c);
    let mut gen = Gen::new(seed);
    gen.only_strings = true;
    let mut now = T0;
    let mut history: Vec<String> = Vec::new();
    let (mut by_module, mut by_twin) = (0, 0);
    for step in 0..steps {
        now = gen.step(now);
        s.set_time(now);
        let words = gen.call(8);
        let through_twin = gen.pct(50);
        let shared = if through_twin {
            by_twin += 1;
            twin.call(c, &words)
        } else {
            by_module += 1;
            module_call(c, &words)
        };
        let alone = module_call(c, &with_keys(&words, reference));
        let engine = if through_twin { "twin" } else { "module" };
        history.push(format!("{engine}: {} -> {shared:?}", show(&words)));
        let context = || {
            let from = history.len().saturating_sub(8);
            format!(
                "seed {seed:#x} (TWIN_SEED), step {step}, clock {now} ns\nlast calls:\n  {}",
                history[from..].join("\n  ")
            )
        };
        let twin_only = matches!(&shared, Err(e) if through_twin && twin_only(e).is_some());
        if twin_only {
            // A call the twin leaves to the module: both keys start afresh.
            for k in key_range(&words) {
                redis::cmd("DEL")
                    .arg(&words[k])
                    .arg(reference(&words[k]))
                    .query::<i64>(c)
                    .unwrap();
            }
            continue;
        }
        assert_eq!(
            shared,
            alone,
            "replies differ from the module alone's\n{}",
            context()
        );
        for k in key_range(&words) {
            let (m, t) = (state(c, &reference(&words[k])), state(c, &words[k]));
            let expiring = twin::diff::same_but_expiring(&m, &t);
            assert!(
                m == t || expiring,
                "state of {} differs\nmodule alone: {m:?}\nswitching:    {t:?}\n{}",
                String::from_utf8_lossy(&words[k]),
                context()
            );
        }
    }
    eprintln!("seed {seed:#x}: {by_module} calls through the module, {by_twin} through the twin");
}

#[test]
fn alternating_engines_answer_as_the_module_alone() {
    let steps = env_u64("TWIN_STEPS").unwrap_or(4_000) as usize;
    match env_u64("TWIN_SEED") {
        Some(seed) => switching(seed, steps),
        None => {
            for seed in [0x5317_C401, 0xA17E_2026] {
                switching(seed, steps);
            }
        }
    }
}
