//! Hostile input to the Functions twin: random argument vectors (random
//! bytes, huge and odd numbers, empty words, option words, hundreds of
//! words) for every function. The twin answers what the module answers on
//! a fresh key, never raises a Lua runtime error, and writes nothing when
//! it answers an error.

use crate::support::*;
use crate::twin::diff::Pair;
use crate::twin::gen::GRAMMAR_WORDS;
use crate::twin::*;

/// The twin's commands: the users' but `CL.LIMIT`, the last.
const COMMANDS: &[&str] = USER_COMMANDS.split_last().unwrap().1;

/// Numbers and durations, odd or not.
const NUMBERS: &[&str] = &[
    "0",
    "1",
    "2",
    "5",
    "10",
    "-1",
    "-0",
    "+1",
    "007",
    "1.5",
    ".5",
    "5.",
    "1e3",
    "1e308",
    "inf",
    "nan",
    "0x10",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "99999999999999999999999999999",
    "9007199254740993",
    "0.000000001",
    "1.0000000001",
    "500ms",
    "1.5s",
    "15m",
    "1h",
    "1d",
    "0.5ms",
    "1w",
    "ms",
];

/// Zones and calendar units.
const ZONES: &[&str] = &["+09:00", "-12:00", "+14:01", "day", "month", "UTC"];

fn word(rng: &mut Rng) -> Vec<u8> {
    match rng.below(10) {
        0 => (0..rng.below(12)).map(|_| rng.below(256) as u8).collect(),
        1 => Vec::new(),
        2 => (0..1 + rng.below(40))
            .map(|_| b'0' + rng.below(10) as u8)
            .collect(),
        _ => {
            let words = [NUMBERS, &GRAMMAR_WORDS, ZONES].concat();
            words[rng.below(words.len() as u64) as usize]
                .as_bytes()
                .to_vec()
        }
    }
}

/// A Lua runtime error, as the server decorates it.
fn runtime_error(e: &str) -> bool {
    [
        "user_function",
        "user_script",
        "script:",
        "attempt to",
        "stack traceback",
    ]
    .iter()
    .any(|s| e.contains(s))
}

#[test]
fn random_arguments_answer_as_the_module_and_never_break_the_twin() {
    let s = Server::start();
    let c = &mut s.conn();
    let mut pair = Pair::new(c, 0);
    let mut rng = Rng(env_u64("TWIN_SEED").unwrap_or(0x4057_11E5) | 1);
    let calls = env_u64("TWIN_STEPS").unwrap_or(3_000) as usize;
    let mut differences = Vec::new();
    for i in 0..calls {
        s.set_time(T0 + (i as i64) * 1_000);
        let command = COMMANDS[i % COMMANDS.len()];
        let mut words = vec![command.as_bytes().to_vec()];
        let key = format!("h:{i}").into_bytes();
        let n = match rng.below(20) {
            0 => 100 + rng.below(300),
            _ => rng.below(9),
        };
        if command == "cl.throttleall" {
            // FCALL takes numkeys itself: a count of the keys that follow.
            let keys = 1 + rng.below(3);
            words.push(keys.to_string().into_bytes());
            for k in 0..keys {
                words.push(format!("h:{i}:{k}").into_bytes());
            }
        } else {
            words.push(key);
        }
        for _ in 0..n {
            words.push(word(&mut rng));
        }
        let twin_words = pair.twin_side(&words);
        let twin_keys: Vec<Vec<u8>> = key_range(&words).map(|k| twin_key(&words[k])).collect();
        let module_keys: Vec<Vec<u8>> = key_range(&words).map(|k| words[k].clone()).collect();
        // The twin alone first: an error (whichever) is one of its
        // replies and writes nothing.
        let before = dbsize(c);
        if let Err(e) = pair.twin.call(c, &twin_words) {
            assert!(
                !runtime_error(&e),
                "Lua runtime error for {}: {e}",
                show(&words)
            );
            assert_eq!(
                dbsize(c),
                before,
                "twin wrote on an error: {}: {e}",
                show(&words)
            );
        }
        redis::cmd("DEL").arg(&twin_keys).query::<i64>(c).unwrap();
        match pair.compare(c, &words) {
            Err(difference) if differences.len() < 40 => {
                differences.push(format!(
                    "{}\n    {}",
                    show(&words),
                    difference.replace('\n', "\n    ")
                ));
            }
            Err(_) => differences.push(String::new()),
            Ok(_) => {}
        }
        // Start every call afresh.
        redis::cmd("DEL")
            .arg(&twin_keys)
            .arg(&module_keys)
            .query::<i64>(c)
            .unwrap();
    }
    // Functions called with other than one key (FCALL fn 0, fn 2 k k).
    for &command in COMMANDS {
        for keys in [0, 2] {
            for args in [0, 3, 8] {
                let mut call = match &pair.twin {
                    Twin::Functions => {
                        let mut c = redis::cmd("FCALL");
                        c.arg(function_name(command.as_bytes()));
                        c
                    }
                    Twin::Eval { sha } => {
                        let mut c = redis::cmd("EVALSHA");
                        c.arg(sha);
                        c
                    }
                };
                call.arg(keys);
                for k in 0..keys {
                    call.arg(format!("odd:{k}"));
                }
                if let Twin::Eval { .. } = pair.twin {
                    call.arg(command);
                }
                for a in 0..args {
                    call.arg(["5", "10", "1", "MS"][a % 4]);
                }
                let before = dbsize(c);
                match call.query::<Value>(c).map_err(error_text) {
                    Err(e) => assert!(!runtime_error(&e), "{command} with {keys} keys: {e}"),
                    Ok(v) => assert!(
                        command == "cl.throttleall",
                        "{command} with {keys} keys answered {v:?}"
                    ),
                }
                if command != "cl.throttleall" {
                    assert_eq!(dbsize(c), before, "{command} with {keys} keys wrote");
                }
            }
        }
    }
    assert!(
        differences.is_empty(),
        "{} of {calls} calls differ (the first 40):\n  {}",
        differences.len(),
        differences[..differences.len().min(40)].join("\n  ")
    );
}
