//! The policy set and the top-offender summaries, in module memory behind
//! one lock: what every policy call looks up and every refusal records.

use super::words::Made;
use crate::error::{self, CmdError};
use crate::limiter::Limiter;
use cell_core::policy::{self, Counters, Outcome, Saved};
use cell_core::top::{Seeded, Top};
use std::collections::HashMap;
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
    pub(super) top: Option<Box<Top<Vec<u8>>>>,
    /// A limiter tried beside the enforced one, in shadow mode, on keys of
    /// its own (`CL.POLICY SET ... TRIAL limiter`).
    pub trial: Option<Trial>,
}

/// A policy's trial: its limiter, what it decided, and the keys it would
/// have refused most often (by the call's key).
pub struct Trial {
    pub limiter: Limiter,
    pub counters: Counters,
    pub(super) top: Option<Box<Top<Vec<u8>>>>,
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
    pub(super) policies: HashMap<Vec<u8>, Policy, Seeded>,
    /// Every limiter command's refusals, policy or not.
    top: Option<Box<Top<Vec<u8>>>>,
    pub(super) capacity: usize,
    /// While an RDB loads: the set it carries (empty until its auxiliary
    /// data is read), which replaces `policies` when the load succeeds.
    pub(super) loading: Option<HashMap<Vec<u8>, Policy, Seeded>>,
}

pub(super) static REGISTRY: LazyLock<Mutex<Registry>> = LazyLock::new(|| {
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
        self.find(name)?.ok_or_else(|| error::unknown_policy(name))
    }

    /// As [`Registry::lookup`], with `None` for a policy that does not
    /// exist (a call's own limiter then decides).
    pub fn find(&self, name: &[u8]) -> Result<Option<Found>, CmdError> {
        let Some(p) = self.policies.get(name) else {
            return Ok(None);
        };
        match (&p.limiter, &p.unusable) {
            (Some(l), _) => Ok(Some(Found {
                limiter: l.clone(),
                shadow: p.shadow,
                trial: p.trial.as_ref().map(|t| t.limiter.clone()),
            })),
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
