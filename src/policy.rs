//! The server's named policies and what the limiters refused: the policy
//! set (`CL.POLICY`), each policy's counters, and the top-offender
//! summaries (`CL.TOP`). This is server configuration, not keys: it lives
//! in module memory, is saved in RDB files as the module's auxiliary data
//! (the `cell-pols` type, which holds no keys), reaches replicas by full
//! sync and by the replication of `CL.POLICY SET`/`DEL`, and is counted
//! per node. Every load of an RDB (a restart, `DEBUG RELOAD`, a full sync)
//! ends with exactly the file's set, none if the file has no set.
//!
//! Commands run on the server's main thread; the lock only makes the
//! static safe to share (an RDB child process reads it after `fork`, when
//! no command holds it).

use crate::error::{self, CmdError};
use crate::limiter::{self, Limiter};
use crate::zones;
use cell_core::policy::{self, Counters, Outcome, Saved};
use cell_core::top::{Seeded, Top};
use cell_core::zoned;
use redis_module::native_types::RedisType;
use redis_module::{raw, Context, RedisString, Status};
use std::collections::HashMap;
use std::ffi::CString;
use std::os::raw::{c_char, c_int, c_void};
use std::sync::{LazyLock, Mutex, MutexGuard};

/// The default capacity of a top-offender summary, in keys.
pub const DEFAULT_TOP_CAPACITY: usize = 1024;
/// The largest capacity a summary may be given.
pub const MAX_TOP_CAPACITY: usize = 1 << 20;

/// One named policy.
pub struct Policy {
    /// `None` when this server cannot use the policy (see [`Unusable`]).
    pub limiter: Option<Limiter>,
    pub shadow: bool,
    /// The limiter's words as given to `CL.POLICY SET` (without `SHADOW`).
    pub words: Vec<Vec<u8>>,
    /// The rules (TZif data) of the time zone the limiter names, as the
    /// master read them: every node decides the same windows with them.
    pub zone: Option<Vec<u8>>,
    /// Why this server cannot use the policy, when it cannot.
    pub unusable: Option<Unusable>,
    pub counters: Counters,
    /// The keys this policy refused most often; made on its first refusal.
    top: Option<Box<Top<Vec<u8>>>>,
    /// A limiter tried beside the enforced one, in shadow mode, on keys of
    /// its own (`CL.POLICY SET ... TRIAL limiter`).
    pub trial: Option<Trial>,
}

/// A policy's trial: its limiter, what it decided, and the keys it would
/// have refused most often (by the call's key).
pub struct Trial {
    pub limiter: Limiter,
    pub counters: Counters,
    top: Option<Box<Top<Vec<u8>>>>,
}

impl Trial {
    pub fn new(limiter: Limiter) -> Self {
        Self {
            limiter,
            counters: Counters::default(),
            top: None,
        }
    }
}

/// What a call needs of a policy: its limiter, its shadow flag, its
/// trial's limiter (copies: the lock need not be held while they decide).
pub struct Found {
    pub limiter: Limiter,
    pub shadow: bool,
    pub trial: Option<Limiter>,
}

pub struct Registry {
    /// Looked up by every policy call: the summaries' fast hash (names are
    /// the operator's).
    policies: HashMap<Vec<u8>, Policy, Seeded>,
    /// Every limiter command's refusals, policy or not.
    top: Option<Box<Top<Vec<u8>>>>,
    capacity: usize,
    /// While an RDB loads: the set it carries (empty until its auxiliary
    /// data is read), which replaces `policies` when the load succeeds.
    loading: Option<HashMap<Vec<u8>, Policy, Seeded>>,
}

static REGISTRY: LazyLock<Mutex<Registry>> = LazyLock::new(|| {
    Mutex::new(Registry {
        policies: HashMap::with_hasher(Seeded::new()),
        top: None,
        capacity: DEFAULT_TOP_CAPACITY,
        loading: None,
    })
});

/// The registry, locked. A panic while it was held cannot leave it torn
/// in a way that matters (counters and summaries), so a poisoned lock is
/// taken as it is.
pub fn registry() -> MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

/// A refused call to record: the key, whether it was answered in shadow
/// mode.
#[derive(Clone, Copy)]
pub struct Refusal<'a> {
    pub key: &'a [u8],
    pub shadow: bool,
}

/// One key as `CL.TOP` reports it.
pub struct Offender {
    pub key: Vec<u8>,
    pub count: u64,
    pub error: u64,
    pub shadow: u64,
}

/// A summary's `n` keys refused most often; the summary is emptied
/// afterwards if `reset`.
fn answer(slot: &mut Option<Box<Top<Vec<u8>>>>, n: usize, reset: bool) -> Vec<Offender> {
    let out = slot
        .as_ref()
        .map(|t| {
            t.top(n)
                .into_iter()
                .map(|h| Offender {
                    key: h.key.to_vec(),
                    count: h.count,
                    error: h.error,
                    shadow: h.shadow,
                })
                .collect()
        })
        .unwrap_or_default();
    if reset {
        *slot = None;
    }
    out
}

/// Why a server holds a policy it cannot use. It keeps the policy (saved,
/// replicated, listed) instead of dropping it or failing a load, and every
/// call that names it answers an error that says why.
#[derive(Clone, Debug)]
pub enum Unusable {
    /// The limiter names a time zone this server's database lacks, and no
    /// rules came with it (a file or a master of an older version).
    Zone(Vec<u8>),
    /// The words are no limiter this version reads (a newer version's).
    Words,
}

impl Registry {
    pub fn policy(&self, name: &[u8]) -> Option<&Policy> {
        self.policies.get(name)
    }

    /// The policy with its trial, as a call uses it (a copy: the lock need
    /// not be held while it decides), or the error a call naming it
    /// answers.
    pub fn lookup(&self, name: &[u8]) -> Result<Found, CmdError> {
        let p = self
            .policies
            .get(name)
            .ok_or_else(|| error::unknown_policy(name))?;
        match (&p.limiter, &p.unusable) {
            (Some(l), _) => Ok(Found {
                limiter: l.clone(),
                shadow: p.shadow,
                trial: p.trial.as_ref().map(|t| t.limiter.clone()),
            }),
            (None, Some(Unusable::Zone(zone))) => Err(error::policy_zone(name, zone)),
            (None, _) => Err(error::policy_unreadable(name)),
        }
    }

    /// Gives the policy a trial, keeps the one it has (its counters and
    /// summary) with a new limiter, or drops it (`None`).
    pub fn set_trial(&mut self, name: &[u8], trial: Option<Limiter>) {
        if let Some(p) = self.policies.get_mut(name) {
            match (trial, p.trial.as_mut()) {
                (None, _) => p.trial = None,
                (Some(l), Some(t)) => t.limiter = l,
                (Some(l), None) => p.trial = Some(Trial::new(l)),
            }
        }
    }

    /// Counts one decision of a policy's trial and records its refusal of
    /// `key` (the call's key) in the trial's summary.
    pub fn record_trial(&mut self, name: &[u8], outcome: Outcome, key: &[u8]) {
        let capacity = self.capacity;
        let Some(t) = self.policies.get_mut(name).and_then(|p| p.trial.as_mut()) else {
            return;
        };
        t.counters.count(outcome);
        if outcome == Outcome::ShadowRefused && capacity > 0 {
            t.top
                .get_or_insert_with(|| Box::new(Top::new(capacity)))
                .record(&cell_core::top::bounded_key(key), true);
        }
    }

    /// The `n` keys a policy's trial would have refused most often; the
    /// summary is cleared afterwards if `reset`.
    pub fn trial_top(
        &mut self,
        n: usize,
        name: &[u8],
        reset: bool,
    ) -> Result<Vec<Offender>, CmdError> {
        let p = self
            .policies
            .get_mut(name)
            .ok_or_else(|| error::unknown_policy(name))?;
        let t = p.trial.as_mut().ok_or_else(|| error::no_trial(name))?;
        let out = answer(&mut t.top, n, reset);
        Ok(out)
    }

    /// Creates or replaces a policy; a replaced one keeps its counters and
    /// its summary.
    pub fn set(&mut self, name: &[u8], made: Made, shadow: bool) -> Result<(), CmdError> {
        if let Some(p) = self.policies.get_mut(name) {
            p.limiter = made.limiter;
            p.shadow = shadow;
            p.words = made.words;
            p.zone = made.zone;
            p.unusable = made.unusable;
            return Ok(());
        }
        if self.policies.len() >= policy::MAX_POLICIES {
            return Err(error::TOO_MANY_POLICIES);
        }
        self.policies.insert(
            name.to_vec(),
            Policy {
                limiter: made.limiter,
                shadow,
                words: made.words,
                zone: made.zone,
                unusable: made.unusable,
                counters: Counters::default(),
                top: None,
                trial: None,
            },
        );
        Ok(())
    }

    pub fn delete(&mut self, name: &[u8]) -> bool {
        self.policies.remove(name).is_some()
    }

    /// The names, sorted.
    pub fn names(&self) -> Vec<&[u8]> {
        let mut names: Vec<&[u8]> = self.policies.keys().map(Vec::as_slice).collect();
        names.sort_unstable();
        names
    }

    /// Counts one call of a policy (if any) and records a refusal (if any)
    /// in the summaries.
    pub fn record(&mut self, policy: Option<&[u8]>, outcome: Outcome, refusal: Option<Refusal>) {
        let capacity = self.capacity;
        // The summaries track keys of at most MAX_KEY bytes.
        let bounded = refusal.map(|r| cell_core::top::bounded_key(r.key));
        let refusal = refusal.zip(bounded.as_deref()).map(|(r, key)| Refusal {
            key,
            shadow: r.shadow,
        });
        let p = policy.and_then(|name| self.policies.get_mut(name));
        if let Some(r) = refusal {
            if capacity > 0 {
                self.top
                    .get_or_insert_with(|| Box::new(Top::new(capacity)))
                    .record(r.key, r.shadow);
            }
        }
        if let Some(p) = p {
            p.counters.count(outcome);
            if let (Some(r), true) = (refusal, capacity > 0) {
                p.top
                    .get_or_insert_with(|| Box::new(Top::new(capacity)))
                    .record(r.key, r.shadow);
            }
        }
    }

    /// The `n` keys refused most often, by all limiters or by one policy;
    /// the summary is cleared afterwards if `reset`.
    pub fn top(
        &mut self,
        n: usize,
        policy: Option<&[u8]>,
        reset: bool,
    ) -> Result<Vec<Offender>, CmdError> {
        let slot = match policy {
            None => &mut self.top,
            Some(name) => {
                &mut self
                    .policies
                    .get_mut(name)
                    .ok_or_else(|| error::unknown_policy(name))?
                    .top
            }
        };
        let out = answer(slot, n, reset);
        Ok(out)
    }

    /// A new capacity for the summaries: they start over.
    pub fn set_capacity(&mut self, capacity: usize) {
        self.capacity = capacity;
        self.top = None;
        for p in self.policies.values_mut() {
            p.top = None;
            if let Some(t) = p.trial.as_mut() {
                t.top = None;
            }
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The summaries' heap bytes now, and the most they can take with this
    /// capacity and this many policies, whatever the keys.
    pub fn top_memory(&self) -> (usize, usize) {
        let used = self
            .policies
            .values()
            .flat_map(|p| {
                [
                    p.top.as_ref(),
                    p.trial.as_ref().and_then(|t| t.top.as_ref()),
                ]
            })
            .chain([self.top.as_ref()])
            .flatten()
            .map(|t| t.memory())
            .sum();
        let trials = self.policies.values().filter(|p| p.trial.is_some()).count();
        let worst = (1 + self.policies.len() + trials)
            .saturating_mul(self.capacity)
            .saturating_mul(Top::<Vec<u8>>::worst_bytes_per_entry());
        (used, worst)
    }

    /// Forgets every summary (a `FLUSHALL`: the keys they name are gone).
    pub fn clear_summaries(&mut self) {
        self.top = None;
        for p in self.policies.values_mut() {
            p.top = None;
            if let Some(t) = p.trial.as_mut() {
                t.top = None;
            }
        }
    }

    /// Every policy with its counters, sorted by name (for `INFO`).
    pub fn counters(&self) -> Vec<(&[u8], bool, Counters)> {
        let mut all: Vec<_> = self
            .policies
            .iter()
            .map(|(n, p)| (n.as_slice(), p.shadow, p.counters))
            .collect();
        all.sort_unstable_by(|a, b| a.0.cmp(b.0));
        all
    }

    pub fn saved(&self) -> Vec<Saved> {
        self.names()
            .into_iter()
            .filter_map(|name| {
                self.policies.get(name).map(|p| Saved {
                    name: name.to_vec(),
                    shadow: p.shadow,
                    words: p.words.clone(),
                    zone: p.zone.clone(),
                })
            })
            .collect()
    }
}

/// A policy as made from its words (and zone rules), before it is stored.
pub struct Made {
    pub limiter: Option<Limiter>,
    /// The trial's limiter (`limiter TRIAL limiter`), if any.
    pub trial: Option<Limiter>,
    pub words: Vec<Vec<u8>>,
    pub zone: Option<Vec<u8>>,
    pub unusable: Option<Unusable>,
}

/// The zone named after `TZ` in a limiter's words, if any.
pub fn zone_word(words: &[Vec<u8>]) -> Option<&[u8]> {
    words
        .windows(2)
        .skip(1)
        .find(|w| w[0].eq_ignore_ascii_case(b"TZ"))
        .map(|w| w[1].as_slice())
}

/// Makes the policy a user's `CL.POLICY SET` gives, on the node where it
/// is set: the limiter is read with the zone rules this server has, and
/// those rules are kept with the policy (and then used here too, so that
/// this node and every node given them decide alike). Errors are the
/// user's: a zone this server does not know is `BAD_TZ`.
pub fn made_here(words: Vec<Vec<u8>>) -> Result<Made, CmdError> {
    let (limiter, trial) = policy_of(&words)?;
    if let Some((_, tzif)) = zone_word(&words).and_then(zoned::find_tzif) {
        if let Some(made) = made_with_rules(words.clone(), tzif) {
            return Ok(made);
        }
    }
    Ok(Made {
        limiter: Some(limiter),
        trial,
        words,
        zone: None,
        unusable: None,
    })
}

/// The limiter of `words` with the zone it names taken from `tzif`.
fn made_with_rules(words: Vec<Vec<u8>>, tzif: Vec<u8>) -> Option<Made> {
    let word = std::str::from_utf8(zone_word(&words)?).ok()?.to_string();
    let zone = zoned::from_tzif(&word, &tzif)?;
    let (limiter, trial) = zones::with_pinned(&word, zone, || policy_of(&words)).ok()?;
    Some(Made {
        limiter: Some(limiter),
        trial,
        words,
        zone: Some(tzif),
        unusable: None,
    })
}

/// Makes a policy that comes from elsewhere: a master, an AOF, an RDB
/// file. Never an error: a policy this server cannot use is kept, marked
/// unusable (and logged), so that a load never fails and no policy is
/// dropped because of one node's time zone database or version.
pub fn made_from(name: &[u8], words: Vec<Vec<u8>>, zone: Option<Vec<u8>>) -> Made {
    if let Some(tzif) = zone.clone() {
        if let Some(made) = made_with_rules(words.clone(), tzif) {
            return made;
        }
    }
    match policy_of(&words) {
        Ok((limiter, trial)) => Made {
            limiter: Some(limiter),
            trial,
            words,
            zone,
            unusable: None,
        },
        Err(e) => {
            let unusable = match zone_word(&words) {
                Some(z) if e == error::BAD_TZ => Unusable::Zone(z.to_vec()),
                _ => Unusable::Words,
            };
            let why = match &unusable {
                Unusable::Zone(z) => format!(
                    "it uses the time zone '{}', which this server's time zone database does not have and whose rules did not come with it",
                    String::from_utf8_lossy(z)
                ),
                Unusable::Words => format!(
                    "its limiter is not one this version reads: {}",
                    String::from_utf8_lossy(&words.join(&b' '))
                ),
            };
            redis_module::logging::log_warning(format!(
                "redis-cell: policy '{}' is kept but cannot be used on this server: {why}; calls that name it answer an error until it is set again",
                String::from_utf8_lossy(name)
            ));
            Made {
                limiter: None,
                trial: None,
                words,
                zone,
                unusable: Some(unusable),
            }
        }
    }
}

/// A policy's words split at `TRIAL`: the enforced limiter's, and the
/// trial's if there is one (a `TRIAL` that is a `TZ` value does not split).
pub fn split_trial(words: &[Vec<u8>]) -> (&[Vec<u8>], Option<&[Vec<u8>]>) {
    let at = (0..words.len()).find(|&i| {
        words[i].eq_ignore_ascii_case(b"TRIAL")
            && !(i > 0 && words[i - 1].eq_ignore_ascii_case(b"TZ"))
    });
    match at {
        Some(i) => (&words[..i], Some(&words[i + 1..])),
        None => (words, None),
    }
}

/// A policy's limiter and its trial's from its words (`limiter [TRIAL
/// limiter]`), each read as [`limiter_of`] reads one, of one kind.
pub fn policy_of(words: &[Vec<u8>]) -> Result<(Limiter, Option<Limiter>), CmdError> {
    let (own, trial) = split_trial(words);
    let limiter = limiter_of(own)?;
    let trial = match trial {
        None => None,
        Some(words) => {
            let t = limiter_of(words)?;
            if limiter::family(&t) != limiter::family(&limiter) {
                return Err(error::TRIAL_KIND);
            }
            Some(t)
        }
    };
    Ok((limiter, trial))
}

/// A policy's limiter from its words, read by `CL.THROTTLEALL`'s grammar
/// (all words must be taken).
pub fn limiter_of(words: &[Vec<u8>]) -> Result<Limiter, CmdError> {
    let word = |i: usize| words.get(i).map(Vec::as_slice);
    let kind = word(0)
        .and_then(limiter::kind_of)
        .ok_or(error::UNKNOWN_LIMITER)?;
    let read = limiter::read(&word, kind, 1, &[], &|_| false, error::POLICY_LIMITER_WORDS)?;
    if read.next != words.len() {
        return Err(error::POLICY_LIMITER_WORDS);
    }
    Ok(read.limiter)
}

const AUX_VERSION: i32 = 0;

/// Holds no keys: it carries the policy set in RDB files (and in the RDB
/// preamble of an AOF rewrite, and the RDB of a full sync).
///
/// Both save callbacks are given, and the server picks by the methods'
/// version it knows: Redis 7.2+ and Valkey read version 5 and call
/// `aux_save2`, which writes nothing when there are no policies, so that
/// such a file loads without the module; Redis 6.2 and 7.0 read the fields
/// of their older versions only (a newer version is accepted) and call
/// `aux_save`, which always writes the set.
pub static POLICY_TYPE: RedisType = RedisType::new(
    "cell-pols",
    AUX_VERSION,
    raw::RedisModuleTypeMethods {
        version: raw::REDISMODULE_TYPE_METHOD_VERSION as u64,
        rdb_load: Some(no_key_load),
        rdb_save: Some(no_key_save),
        aof_rewrite: None,
        mem_usage: None,
        digest: None,
        free: Some(no_key_free),
        aux_load: Some(aux_load),
        aux_save: Some(aux_save),
        aux_save2: Some(aux_save2),
        aux_save_triggers: raw::REDISMODULE_AUX_BEFORE_RDB as c_int,
        free_effort: None,
        unlink: None,
        copy: None,
        defrag: None,
        copy2: None,
        free_effort2: None,
        mem_usage2: None,
        unlink2: None,
    },
);

/// No key ever holds a `cell-pols` value; a payload that claims one is
/// refused.
unsafe extern "C" fn no_key_load(_rdb: *mut raw::RedisModuleIO, _encver: c_int) -> *mut c_void {
    std::ptr::null_mut()
}

unsafe extern "C" fn no_key_save(_rdb: *mut raw::RedisModuleIO, _value: *mut c_void) {}

unsafe extern "C" fn no_key_free(_value: *mut c_void) {}

/// Redis 6.2 and 7.0: saves the whole set, even when empty (such a file
/// needs the module to load).
unsafe extern "C" fn aux_save(rdb: *mut raw::RedisModuleIO, when: c_int) {
    if when != raw::REDISMODULE_AUX_BEFORE_RDB as c_int {
        return;
    }
    let data = policy::encode(&registry().saved());
    raw::save_slice(rdb, &data);
}

/// Redis 7.2+ and Valkey: saves the set unless it is empty; writing
/// nothing leaves no trace of the module in the file.
unsafe extern "C" fn aux_save2(rdb: *mut raw::RedisModuleIO, when: c_int) {
    if when != raw::REDISMODULE_AUX_BEFORE_RDB as c_int {
        return;
    }
    let saved = registry().saved();
    if saved.is_empty() {
        return;
    }
    raw::save_slice(rdb, &policy::encode(&saved));
}

/// Reads the set saved. While an RDB loads (see [`on_loading`]) it waits
/// for the load to succeed; otherwise (an AOF's RDB preamble, whose
/// commands that follow change the set as they replay) it replaces the set
/// at once. A payload that does not decode, or a policy whose limiter this
/// module does not read, fails the load (the module handles I/O errors:
/// the server refuses the file instead of aborting).
unsafe extern "C" fn aux_load(rdb: *mut raw::RedisModuleIO, encver: c_int, when: c_int) -> c_int {
    const ERR: c_int = raw::REDISMODULE_ERR as c_int;
    if encver != AUX_VERSION || when != raw::REDISMODULE_AUX_BEFORE_RDB as c_int {
        return ERR;
    }
    let Ok(buffer) = raw::load_string_buffer(rdb) else {
        return ERR;
    };
    let Some(saved) = policy::decode(buffer.as_ref()) else {
        return ERR;
    };
    let mut policies = HashMap::with_capacity_and_hasher(saved.len(), Seeded::new());
    for s in saved {
        let made = made_from(&s.name, s.words, s.zone);
        policies.insert(
            s.name,
            Policy {
                limiter: made.limiter,
                shadow: s.shadow,
                words: made.words,
                zone: made.zone,
                unusable: made.unusable,
                counters: Counters::default(),
                top: None,
                trial: made.trial.map(Trial::new),
            },
        );
    }
    let mut r = registry();
    match r.loading.as_mut() {
        Some(loading) => *loading = policies,
        None => r.policies = policies,
    }
    raw::REDISMODULE_OK as c_int
}

/// Follows the server's loads, so that each ends with exactly the set its
/// data carries, also when an RDB saved by Redis 7.2+ or Valkey has none:
///
/// - An RDB (a restart, `DEBUG RELOAD`, a replica's full sync, on disk or
///   diskless): the loaded set replaces the current one when the load ends,
///   and only if it succeeds. Until then the current set stays, as the
///   current keys do while a replica loads with `repl-diskless-load
///   swapdb` (the old dataset is served until the new one is complete, and
///   kept if the load fails).
/// - An AOF: the set is cleared when the load starts; the RDB preamble (if
///   any) and the replayed `CL.POLICY` commands then make it.
unsafe extern "C" fn on_loading(
    _ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    subevent: u64,
    _data: *mut c_void,
) {
    let mut r = registry();
    match subevent {
        raw::REDISMODULE_SUBEVENT_LOADING_RDB_START
        | raw::REDISMODULE_SUBEVENT_LOADING_REPL_START => {
            r.loading = Some(HashMap::with_hasher(Seeded::new()));
        }
        raw::REDISMODULE_SUBEVENT_LOADING_AOF_START => {
            r.loading = None;
            r.policies.clear();
        }
        raw::REDISMODULE_SUBEVENT_LOADING_ENDED => {
            if let Some(loaded) = r.loading.take() {
                r.policies = loaded;
            }
        }
        raw::REDISMODULE_SUBEVENT_LOADING_FAILED => r.loading = None,
        _ => {}
    }
}

/// `FLUSHALL` empties the summaries: the keys they name are gone (a
/// `FLUSHDB` of one database keeps them; they do not say which database a
/// key was in).
unsafe extern "C" fn on_flush(
    _ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    subevent: u64,
    data: *mut c_void,
) {
    if subevent != raw::REDISMODULE_SUBEVENT_FLUSHDB_END || data.is_null() {
        return;
    }
    // SAFETY: the server passes its flush information with this event.
    let info = unsafe { &*(data as *const raw::RedisModuleFlushInfo) };
    if info.dbnum == -1 {
        registry().clear_summaries();
    }
}

/// An AOF rewrite writes its base in a child process; with
/// `aof-use-rdb-preamble no` that base holds commands for keys only, so the
/// policy set would be lost at the next load. When the child of an AOF
/// rewrite is born, the parent therefore sets a timer that propagates
/// `CL.POLICY SET` for every policy at once (in the next turn of the event
/// loop, outside the command that may have forked, whose propagation it
/// would otherwise change). The commands land in what follows the new base
/// (Redis 7.0+ and Valkey open the new incremental file before the fork;
/// Redis 6.2 appends the rewrite buffer to the base): the set then
/// replays to exactly the one of that instant, whatever the base holds and
/// whatever changed between the fork and the timer. With the RDB preamble
/// they repeat its aux data, and replicas get what they hold already.
unsafe extern "C" fn on_fork(
    ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    subevent: u64,
    _data: *mut c_void,
) {
    if subevent != raw::REDISMODULE_SUBEVENT_FORK_CHILD_BORN || !aof_rewrite_in_progress(ctx) {
        return;
    }
    if let Some(create_timer) = api!(RedisModule_CreateTimer) {
        // SAFETY: the event's live context; the callback takes no data.
        unsafe { create_timer(ctx, 0, Some(write_policies), std::ptr::null_mut()) };
    }
}

/// How long [`write_policies`] waits before it tries again while the
/// server forbids propagation, in milliseconds.
const PAUSED_RETRY_MS: i64 = 50;

/// The timer set by [`on_fork`]: `CL.POLICY SET` for every policy, to the
/// AOF and the replicas. Nothing may propagate while the server pauses
/// writes (`CLIENT PAUSE ... WRITE`, a failover): the server would abort.
/// Then the timer waits and tries again; the commands still land after the
/// new base, which is all they need.
unsafe extern "C" fn write_policies(ctx: *mut raw::RedisModuleCtx, _data: *mut c_void) {
    if let Some(avoid) = api!(RedisModule_AvoidReplicaTraffic) {
        // SAFETY: takes no arguments; answers whether the server pauses
        // the replication stream.
        if unsafe { avoid() } != 0 {
            if let Some(create_timer) = api!(RedisModule_CreateTimer) {
                // SAFETY: the timer's live context; the callback takes no
                // data.
                unsafe {
                    create_timer(
                        ctx,
                        PAUSED_RETRY_MS,
                        Some(write_policies),
                        std::ptr::null_mut(),
                    )
                };
            }
            return;
        }
    }
    let saved = registry().saved();
    for s in saved {
        replicate_set(ctx, &s);
    }
}

/// Propagates `CL.POLICY SET` for the policy `s`, its zone's rules
/// included (`ZONEINFO`, taken only from a master or an AOF).
pub fn replicate_set(ctx: *mut raw::RedisModuleCtx, s: &Saved) {
    let mut words: Vec<&[u8]> = vec![b"SET", &s.name];
    // SHADOW is the enforced limiter's option: before any TRIAL.
    let (own, trial) = split_trial(&s.words);
    words.extend(own.iter().map(Vec::as_slice));
    if s.shadow {
        words.push(b"SHADOW");
    }
    if let Some(trial) = trial {
        words.push(b"TRIAL");
        words.extend(trial.iter().map(Vec::as_slice));
    }
    if let Some(zone) = &s.zone {
        words.push(ZONEINFO);
        words.push(zone);
    }
    raw::replicate(ctx, "CL.POLICY", words.as_slice());
}

/// The word before a zone's rules in a replicated `CL.POLICY SET`.
pub const ZONEINFO: &[u8] = b"ZONEINFO";

/// Whether the child just born writes an AOF rewrite.
fn aof_rewrite_in_progress(ctx: *mut raw::RedisModuleCtx) -> bool {
    let (Some(get), Some(field), Some(free)) = (
        api!(RedisModule_GetServerInfo),
        api!(RedisModule_ServerInfoGetFieldSigned),
        api!(RedisModule_FreeServerInfo),
    ) else {
        return false;
    };
    // SAFETY: the event's live context; the info data is freed once.
    unsafe {
        let info = get(ctx, c"persistence".as_ptr());
        if info.is_null() {
            return false;
        }
        let mut err: c_int = 0;
        let v = field(info, c"aof_rewrite_in_progress".as_ptr(), &mut err);
        free(ctx, info);
        err == 0 && v == 1
    }
}

/// The `redis-cell_policies` INFO section: the summaries' capacity, the
/// number of policies, and per policy its counters and shadow flag
/// (`policy_<name>:calls=..,allowed=..,refused=..,shadow_refused=..,errors=..,shadow=0|1`,
/// then `trial_calls=..,trial_allowed=..,trial_refused=..,trial_errors=..`
/// for a policy with a trial).
pub fn info(ctx: *mut raw::RedisModuleInfoCtx) {
    let (Some(add_section), Some(add_field), Some(begin), Some(end)) = (
        api!(RedisModule_InfoAddSection),
        api!(RedisModule_InfoAddFieldULongLong),
        api!(RedisModule_InfoBeginDictField),
        api!(RedisModule_InfoEndDictField),
    ) else {
        return;
    };
    // INFO also runs in a crash report, perhaps with the lock held by the
    // command that crashed: never wait for it.
    let registry = match REGISTRY.try_lock() {
        Ok(r) => r,
        Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => return,
    };
    // SAFETY: a live info context and NUL-terminated names, here and
    // below.
    unsafe {
        add_section(ctx, c"policies".as_ptr().cast_mut());
        add_field(
            ctx,
            c"top_capacity".as_ptr().cast_mut(),
            registry.capacity as u64,
        );
        add_field(
            ctx,
            c"policies".as_ptr().cast_mut(),
            registry.policies.len() as u64,
        );
        let (used, worst) = registry.top_memory();
        add_field(ctx, c"top_memory_bytes".as_ptr().cast_mut(), used as u64);
        add_field(
            ctx,
            c"top_memory_max_bytes".as_ptr().cast_mut(),
            worst as u64,
        );
    }
    for (name, shadow, c) in registry.counters() {
        // Names are printable ASCII without NUL (checked on SET and load).
        let Ok(field) = CString::new([b"policy_", name].concat()) else {
            continue;
        };
        let values = [
            (c"calls", c.calls),
            (c"allowed", c.allowed),
            (c"refused", c.refused),
            (c"shadow_refused", c.shadow_refused),
            (c"errors", c.errors),
            (c"shadow", u64::from(shadow)),
        ];
        unsafe {
            begin(ctx, field.as_ptr().cast_mut());
            for (what, value) in values {
                add_field(ctx, what.as_ptr().cast_mut(), value);
            }
            if let Some(t) = registry.policies.get(name).and_then(|p| p.trial.as_ref()) {
                let c = t.counters;
                let trial = [
                    (c"trial_calls", c.calls),
                    (c"trial_allowed", c.allowed),
                    (c"trial_refused", c.shadow_refused),
                    (c"trial_errors", c.errors),
                ];
                for (what, value) in trial {
                    add_field(ctx, what.as_ptr().cast_mut(), value);
                }
            }
            end(ctx);
        }
    }
}

/// The module's configuration at load: `top-capacity` as a module
/// argument (every server: `loadmodule libredis_cell.so top-capacity
/// 2048`), and as `redis-cell.top-capacity` where the server has module
/// configuration (Redis 7.0+, Valkey): `CONFIG SET/GET`, and in the config
/// file. A module argument wins over the config file.
pub fn init(ctx: &Context, args: &[RedisString]) -> Status {
    let mut capacity = None;
    let mut words = args.iter().map(|a| a.as_slice());
    while let Some(word) = words.next() {
        let value = words.next().and_then(|v| cell_core::parse::integer(v).ok());
        match (word.eq_ignore_ascii_case(b"top-capacity"), value) {
            (true, Some(n)) if (0..=MAX_TOP_CAPACITY as i64).contains(&n) => {
                capacity = Some(n as usize)
            }
            _ => {
                ctx.log_warning(&format!(
                    "redis-cell: bad module arguments; expected `top-capacity N` with N from 0 to {MAX_TOP_CAPACITY}"
                ));
                return Status::Err;
            }
        }
    }
    if let (Some(register), Some(load)) = (
        api!(RedisModule_RegisterNumericConfig),
        api!(RedisModule_LoadConfigs),
    ) {
        // SAFETY: called during OnLoad; the name is NUL-terminated and the
        // callbacks have the signatures the server expects.
        let ok = unsafe {
            register(
                ctx.ctx,
                c"top-capacity".as_ptr(),
                DEFAULT_TOP_CAPACITY as i64,
                raw::REDISMODULE_CONFIG_DEFAULT,
                0,
                MAX_TOP_CAPACITY as i64,
                Some(get_capacity),
                Some(set_capacity),
                None,
                std::ptr::null_mut(),
            ) == raw::REDISMODULE_OK as c_int
                && load(ctx.ctx) == raw::REDISMODULE_OK as c_int
        };
        if !ok {
            ctx.log_warning("redis-cell: could not register redis-cell.top-capacity");
            return Status::Err;
        }
    }
    if let Some(n) = capacity {
        registry().set_capacity(n);
    }
    subscribe_to_events(ctx)
}

/// Subscribes [`on_loading`] to the server's loading events and
/// [`on_fork`] to its fork events (Redis 6.0+, every Valkey). A server
/// without them has no `aux_save2` either: every file it saves carries the
/// set, which its load then replaces.
fn subscribe_to_events(ctx: &Context) -> Status {
    let Some(subscribe) = api!(RedisModule_SubscribeToServerEvent) else {
        return Status::Ok;
    };
    let events: [(u64, raw::RedisModuleEventCallback, &str); 3] = [
        (raw::REDISMODULE_EVENT_LOADING, Some(on_loading), "loading"),
        (raw::REDISMODULE_EVENT_FORK_CHILD, Some(on_fork), "fork"),
        (raw::REDISMODULE_EVENT_FLUSHDB, Some(on_flush), "flush"),
    ];
    for (id, callback, what) in events {
        let event = raw::RedisModuleEvent { id, dataver: 1 };
        // SAFETY: called during OnLoad with the load context; the callbacks
        // have the signature the server expects.
        if unsafe { subscribe(ctx.ctx, event, callback) } != raw::REDISMODULE_OK as c_int {
            ctx.log_warning(&format!(
                "redis-cell: could not subscribe to the server's {what} events"
            ));
            return Status::Err;
        }
    }
    Status::Ok
}

unsafe extern "C" fn get_capacity(_name: *const c_char, _privdata: *mut c_void) -> i64 {
    registry().capacity() as i64
}

unsafe extern "C" fn set_capacity(
    _name: *const c_char,
    value: i64,
    _privdata: *mut c_void,
    _err: *mut *mut raw::RedisModuleString,
) -> c_int {
    // The server checked the bounds it was given.
    let value = usize::try_from(value).unwrap_or(DEFAULT_TOP_CAPACITY);
    let mut registry = registry();
    if registry.capacity() != value {
        registry.set_capacity(value);
    }
    raw::REDISMODULE_OK as c_int
}
