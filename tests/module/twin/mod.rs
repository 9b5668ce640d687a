//! The Functions twin (`functions/`) beside the module: loading it into a
//! test server and calling it with a module command's words.
//!
//! On Redis 7.0 and later and on Valkey the library is loaded with
//! `FUNCTION LOAD REPLACE` and called with `FCALL`; on Redis 6.2, which has
//! no functions, the single EVAL script is loaded with `SCRIPT LOAD` and
//! called with `EVALSHA`, the command's name as its first argument.

pub mod diff;
pub mod gen;

use crate::support::{error_text, server_version, Value};
use std::path::PathBuf;

/// The prefix of a twin key: the module drives `K`, the twin `twin:K`.
pub const PREFIX: &str = "twin:";

pub fn functions_dir() -> PathBuf {
    PathBuf::from(root!()).join("functions")
}

/// A generated file of the library, which must exist.
pub fn library_file(name: &str) -> String {
    let path = functions_dir().join(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("the twin's {} is missing: {e}", path.display()))
}

/// How the twin is called on the server under test.
#[derive(Clone, Debug)]
pub enum Twin {
    /// `FCALL name numkeys key... arg...`
    Functions,
    /// `EVALSHA sha numkeys key... name arg...`
    Eval { sha: String },
}

impl Twin {
    /// Loads the twin into the server behind `c`.
    pub fn load(c: &mut redis::Connection) -> Twin {
        if server_version().has_7_0() {
            let name: String = redis::cmd("FUNCTION")
                .arg("LOAD")
                .arg("REPLACE")
                .arg(library_file("redis_cell.lua"))
                .query(c)
                .unwrap_or_else(|e| panic!("FUNCTION LOAD of the twin failed: {e}"));
            assert!(!name.is_empty());
            Twin::Functions
        } else {
            let sha: String = redis::cmd("SCRIPT")
                .arg("LOAD")
                .arg(library_file("redis_cell_eval.lua"))
                .query(c)
                .unwrap_or_else(|e| panic!("SCRIPT LOAD of the twin failed: {e}"));
            Twin::Eval { sha }
        }
    }

    /// The call of the twin function for a module command given as words
    /// (`CL.THROTTLE key 1 2 3`), on the same keys.
    pub fn command(&self, words: &[Vec<u8>]) -> redis::Cmd {
        let (name, keys, args) = split(words);
        let mut cmd = match self {
            Twin::Functions => {
                let mut cmd = redis::cmd("FCALL");
                cmd.arg(&name);
                cmd
            }
            Twin::Eval { sha } => {
                let mut cmd = redis::cmd("EVALSHA");
                cmd.arg(sha);
                cmd
            }
        };
        cmd.arg(keys.len());
        for k in keys {
            cmd.arg(k);
        }
        if let Twin::Eval { .. } = self {
            cmd.arg(String::from_utf8_lossy(&words[0]).to_ascii_lowercase());
        }
        for a in args {
            cmd.arg(a);
        }
        cmd
    }

    /// Calls the twin for a module command given as words.
    pub fn call(&self, c: &mut redis::Connection, words: &[Vec<u8>]) -> Result<Value, String> {
        self.command(words).query::<Value>(c).map_err(error_text)
    }
}

/// A number from the environment (`TWIN_SEED`, `TWIN_STEPS`), decimal or
/// `0x` hexadecimal.
pub fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        let v = v.trim();
        let parsed = match v.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => v.parse(),
        };
        parsed.unwrap_or_else(|_| panic!("{name}={v} is not a number"))
    })
}

/// Whether a call's words may cause an error.
pub type Cause = fn(&[Vec<u8>]) -> bool;

/// The errors only the twin replies, for calls the module serves but Lua's
/// doubles cannot: each with a test of the words that may cause it.
pub fn twin_only(error: &str) -> Option<Cause> {
    const BIG_LIMIT: &str = "ERR limit out of the functions' range: limits above 2^53 are module-only (Lua replies integers as doubles)";
    const BIG_LOG: &str = "ERR limit out of the functions' range: an exact window logs at most 10000 requests (use APPROX, or the module)";
    const BIG_LEASES: &str =
        "ERR limit out of the functions' range: at most 1000 leases per key (use the module)";
    const LONG_ID: &str = "ERR invalid ID: the functions take at most 128 bytes (the module 1024)";
    const RANGE: &str = "ERR parameters out of the functions' range: this call's arithmetic exceeds 9e24 ns; use the module";
    const BIG_COUNT: &str = "ERR count out of the functions' range: a COUNTALL count above 2^53 is module-only (Lua replies integers as doubles)";
    const NAMED_ZONE: &str = "ERR invalid TZ: named time zones are module-only; the functions take an offset from -12:00 to +14:00, such as +09:00";
    match error {
        BIG_LIMIT => Some(|words| words.iter().any(|w| above_2_53(w))),
        BIG_LOG => Some(|words| words.iter().any(|w| above(w, MAX_LOG))),
        BIG_LEASES => Some(|words| words.iter().any(|w| above(w, MAX_LEASES))),
        LONG_ID => Some(|words| words.iter().any(|w| w.len() > MAX_ID)),
        RANGE => Some(|_| true),
        // A count reached by earlier calls, whatever this one's words.
        BIG_COUNT => Some(|words| words.iter().any(|w| w.eq_ignore_ascii_case(b"COUNTALL"))),
        NAMED_ZONE => Some(|words| {
            words.iter().any(|w| {
                w.iter().any(|b| b.is_ascii_alphabetic()) && w.contains(&b'/') || w == b"UTC"
            })
        }),
        _ => None,
    }
}

/// The most requests the twin's exact log holds, and leases a key holds
/// (functions/src/sliding.lua, lease.lua): limits above are refused.
pub const MAX_LOG: u128 = 10_000;
pub const MAX_LEASES: u128 = 1_000;
/// The longest lease id the twin takes a lease with (the module: 1,024).
pub const MAX_ID: usize = 128;

/// Whether a word is an integer above 2^53.
fn above_2_53(word: &[u8]) -> bool {
    above(word, 1 << 53)
}

/// Whether a word is an integer (a sign allowed) above `bound`.
fn above(word: &[u8], bound: u128) -> bool {
    std::str::from_utf8(word)
        .ok()
        .map(|s| s.strip_prefix('+').unwrap_or(s))
        .and_then(|s| s.parse::<u128>().ok())
        .is_some_and(|n| n > bound)
}

/// The function name of a command: `CL.THROTTLE` -> `cl_throttle`.
pub fn function_name(command: &[u8]) -> String {
    String::from_utf8_lossy(command)
        .to_ascii_lowercase()
        .replace('.', "_")
}

/// Whether the command takes `numkeys` keys (`CL.THROTTLEALL`).
fn takes_numkeys(command: &[u8]) -> bool {
    command.eq_ignore_ascii_case(b"CL.THROTTLEALL")
}

/// The number of keys in a module command's words, where its keys are
/// the ones `FCALL` passes as keys: `numkeys` of `CL.THROTTLEALL` when it
/// is a count the words hold, one key otherwise (none if there are no
/// words after the command).
pub fn key_range(words: &[Vec<u8>]) -> std::ops::Range<usize> {
    if words.len() < 2 {
        return 1..1;
    }
    if takes_numkeys(&words[0]) {
        let n = std::str::from_utf8(&words[1])
            .ok()
            .and_then(|s| s.parse::<usize>().ok());
        match n {
            Some(n) if 2 + n <= words.len() => 2..2 + n,
            // Not a count of the words that follow: the twin is called
            // with no keys and the words as arguments.
            _ => 1..1,
        }
    } else {
        1..2
    }
}

/// (function name, keys, arguments) of a module command.
fn split(words: &[Vec<u8>]) -> (String, Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let name = function_name(&words[0]);
    let keys = key_range(words);
    // Without keys every word after the command is an argument.
    let args_from = if keys.is_empty() { 1 } else { keys.end };
    let args = words.get(args_from..).unwrap_or_default().to_vec();
    (name, words[keys].to_vec(), args)
}

/// The command's words with each key renamed by `rename`.
pub fn with_keys(words: &[Vec<u8>], rename: impl Fn(&[u8]) -> Vec<u8>) -> Vec<Vec<u8>> {
    renamed(words, rename, <[u8]>::to_vec)
}

/// The command's words with each key renamed by `key` and every other
/// word by `other`.
pub fn renamed(
    words: &[Vec<u8>],
    key: impl Fn(&[u8]) -> Vec<u8>,
    other: impl Fn(&[u8]) -> Vec<u8>,
) -> Vec<Vec<u8>> {
    let keys = key_range(words);
    words
        .iter()
        .enumerate()
        .map(|(i, w)| if keys.contains(&i) { key(w) } else { other(w) })
        .collect()
}

pub fn twin_key(key: &[u8]) -> Vec<u8> {
    let mut k = PREFIX.as_bytes().to_vec();
    k.extend_from_slice(key);
    k
}

/// Sends a module command given as words.
pub fn module_call(c: &mut redis::Connection, words: &[Vec<u8>]) -> Result<Value, String> {
    let mut cmd = redis::cmd(&String::from_utf8_lossy(&words[0]));
    for w in &words[1..] {
        cmd.arg(w.as_slice());
    }
    cmd.query::<Value>(c).map_err(error_text)
}

/// Words for display: printable ASCII as is, other bytes escaped.
pub fn show(words: &[Vec<u8>]) -> String {
    words
        .iter()
        .map(|w| {
            let s: String = w
                .iter()
                .flat_map(|&b| std::ascii::escape_default(b))
                .map(char::from)
                .collect();
            if s.is_empty() || s.contains(' ') {
                format!("\"{s}\"")
            } else {
                s
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn words(line: &str) -> Vec<Vec<u8>> {
    line.split_whitespace()
        .map(|w| w.as_bytes().to_vec())
        .collect()
}
