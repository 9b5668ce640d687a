//! Running one call through the module on its keys and through the twin
//! on the twin keys, and comparing what both answer and store.

use super::*;
use crate::support::Value;
use std::collections::{HashMap, HashSet, VecDeque};

/// A module and a twin side by side on one server.
pub struct Pair {
    pub twin: Twin,
    /// Generated lease ids: the module's -> the twin's.
    pub ids: HashMap<Vec<u8>, Vec<u8>>,
    /// The twin's generated ids, with their keys.
    pub twin_ids: HashSet<(Vec<u8>, Vec<u8>)>,
    /// The module's generated ids in the order they came.
    pub generated: Vec<Vec<u8>>,
    /// The last calls with both replies, shown when a comparison fails.
    pub history: VecDeque<String>,
    pub seed: u64,
    pub now: i64,
    pub step: usize,
    /// Calls the twin refused with an error of its own.
    pub twin_only: usize,
}

impl Pair {
    pub fn new(c: &mut redis::Connection, seed: u64) -> Pair {
        Pair {
            twin: Twin::load(c),
            ids: HashMap::new(),
            generated: Vec::new(),
            twin_ids: HashSet::new(),
            history: VecDeque::new(),
            seed,
            now: 0,
            step: 0,
            twin_only: 0,
        }
    }

    /// The twin's words: twin keys, and generated ids as the twin knows
    /// them.
    pub fn twin_side(&self, words: &[Vec<u8>]) -> Vec<Vec<u8>> {
        renamed(words, twin_key, |w| {
            self.ids.get(w).cloned().unwrap_or_else(|| w.to_vec())
        })
    }

    fn context(&self, words: &[Vec<u8>]) -> String {
        let history: Vec<&str> = self.history.iter().map(String::as_str).collect();
        format!(
            "seed {:#x} (TWIN_SEED), step {}, clock {} ns\ncall: {}\nlast calls:\n  {}",
            self.seed,
            self.step,
            self.now,
            show(words),
            history.join("\n  ")
        )
    }

    /// Runs `words` on both engines; panics with the context when the
    /// replies or the state of a key differ. Returns the module's reply.
    pub fn check(&mut self, c: &mut redis::Connection, words: &[Vec<u8>]) -> Result<Value, String> {
        match self.compare(c, words) {
            Ok(reply) => reply,
            Err(difference) => panic!("{difference}\n{}", self.context(words)),
        }
    }

    /// Runs `words` on both engines: the module's reply, or what differed.
    pub fn compare(
        &mut self,
        c: &mut redis::Connection,
        words: &[Vec<u8>],
    ) -> Result<Result<Value, String>, String> {
        let module = module_call(c, words);
        let twin_words = self.twin_side(words);
        let twin = self.twin.call(c, &twin_words);
        self.remember(format!("{} -> {:?} / {:?}", show(words), module, twin));
        if let Err(e) = &twin {
            if let Some(reason) = twin_only(e) {
                self.twin_only += 1;
                if !reason(words) {
                    return Err(format!(
                        "twin-only error without its cause\nmodule: {module:?}\ntwin:   {twin:?}"
                    ));
                }
                // What the module did here the twin cannot: both start
                // these keys afresh.
                for k in key_range(words) {
                    redis::cmd("DEL")
                        .arg(&words[k])
                        .arg(twin_key(&words[k]))
                        .query::<i64>(c)
                        .unwrap();
                }
                return Ok(module);
            }
        }
        if !self.same_reply(words, &module, &twin) {
            return Err(format!(
                "replies differ\nmodule: {module:?}\ntwin:   {twin:?}\ntwin call: {}",
                show(&twin_words)
            ));
        }
        for k in key_range(words) {
            state_difference(c, &words[k])?;
        }
        Ok(module)
    }

    pub fn remember(&mut self, line: String) {
        if self.history.len() == 8 {
            self.history.pop_front();
        }
        self.history.push_back(line);
    }

    /// Whether two replies are the same, a lease id the module generated
    /// matching the one the twin generated in the same call (recorded for
    /// later calls).
    fn same_reply(
        &mut self,
        words: &[Vec<u8>],
        module: &Result<Value, String>,
        twin: &Result<Value, String>,
    ) -> bool {
        let acquire = words[0].eq_ignore_ascii_case(b"cc.acquire");
        match (module, twin) {
            (Ok(Value::Array(m)), Ok(Value::Array(t)))
                if acquire && m.len() == 6 && t.len() == 6 =>
            {
                if m[..5] != t[..5] {
                    return false;
                }
                match (&m[5], &t[5]) {
                    (Value::BulkString(mid), Value::BulkString(tid)) => {
                        match self.ids.get(mid) {
                            Some(known) => known == tid,
                            // An id the caller gave is the same on both.
                            None if words.iter().any(|w| w == mid) => mid == tid,
                            None => {
                                // The twin's ids are unique per key (the
                                // module's are random, so unique anywhere).
                                let key = words.get(1).cloned().unwrap_or_default();
                                let fresh = self.twin_ids.insert((key, tid.clone()))
                                    && !tid.is_empty()
                                    && tid.len() <= 1024;
                                self.ids.insert(mid.clone(), tid.clone());
                                self.generated.push(mid.clone());
                                fresh
                            }
                        }
                    }
                    (m, t) => m == t,
                }
            }
            // An error may quote a word: a generated id the twin was given
            // in place of the module's.
            (Err(m), Err(t)) => {
                let mut t = t.clone();
                for w in words {
                    if let Some(tid) = self.ids.get(w) {
                        t = t.replace(&*String::from_utf8_lossy(tid), &String::from_utf8_lossy(w));
                    }
                }
                *m == t
            }
            _ => module == twin,
        }
    }
}

/// What a key holds as its engine's state: the module's types and the
/// twin's own strings (`\0SWE`, `\0SWA`, `\0CCL` ...) by kind, a plain
/// string (a TAT or a counter) with its bytes; and its PTTL.
pub fn state(c: &mut redis::Connection, key: &[u8]) -> State {
    let kind: String = redis::cmd("TYPE").arg(key).query(c).unwrap();
    let pttl: i64 = redis::cmd("PTTL").arg(key).query(c).unwrap();
    if kind != "string" {
        let kind = match kind.as_str() {
            "cell-swin" => "sliding window",
            "cell-conc" => "leases",
            other => other,
        };
        return (kind.to_string(), None, pttl);
    }
    let value: Vec<u8> = redis::cmd("GET").arg(key).query(c).unwrap();
    let kind = match value.get(..4) {
        Some(b"\0SWE") | Some(b"\0SWA") => "sliding window",
        Some(b"\0CCL") => "leases",
        _ => return ("string".to_string(), Some(value), pttl),
    };
    (kind.to_string(), None, pttl)
}

/// Whether two states differ only in a way that means the same to both
/// engines: a state whose expiry is the current millisecond. The module
/// keeps its key to the end of that millisecond (PTTL 0; Redis 8 may
/// already answer PTTL -2 for it while GET still finds it), which a script
/// cannot everywhere (Valkey deletes a key `SET ... PXAT now` at once), so
/// the twin may give it the next millisecond (PTTL 1, then 0 while the
/// module's key is gone). Both engines treat such a state as expired.
pub fn same_but_expiring(m: &State, t: &State) -> bool {
    let dead = |s: &State| s.0 == "none" || (s.2 == 0 || s.2 == -2);
    (m.0 == t.0 && m.2 == 0 && t.2 == 1 && m.1 == t.1) || (dead(m) && dead(t))
}

/// A key's kind, its bytes (for a plain string) and its PTTL.
pub type State = (String, Option<Vec<u8>>, i64);

/// A key holds the same state for the module as its twin key for the
/// twin: the same kind, the same expiry, and for CL and FW (plain
/// strings) the same bytes.
pub fn state_difference(c: &mut redis::Connection, key: &[u8]) -> Result<(), String> {
    let (m, t) = (state(c, key), state(c, &twin_key(key)));
    let expiring = same_but_expiring(&m, &t);
    if m != t && !expiring {
        let show = |s: &State| {
            format!(
                "{} {:?} PTTL {}",
                s.0,
                s.1.as_deref().map(String::from_utf8_lossy),
                s.2
            )
        };
        return Err(format!(
            "state of {} differs\nmodule: {}\ntwin:   {}",
            String::from_utf8_lossy(key),
            show(&m),
            show(&t)
        ));
    }
    Ok(())
}
