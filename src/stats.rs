//! Per-command counters for the module's `INFO` section. Commands run on
//! the server's main thread; relaxed atomics make the statics safe to share
//! at the cost of a plain increment (a load and a store, not a locked
//! read-modify-write: only that thread writes them).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

#[derive(Default)]
pub struct Stats {
    calls: AtomicU64,
    allowed: AtomicU64,
    limited: AtomicU64,
    shadow_refused: AtomicU64,
    errors: AtomicU64,
}

/// What one call ended as.
#[derive(Clone, Copy)]
pub enum Outcome {
    Allowed,
    Limited,
    /// Refused, answered allowed (shadow mode).
    ShadowRefused,
    /// A reply that is neither (the internal replay commands).
    Done,
    Error,
}

impl Outcome {
    /// The outcome a verdict counts as.
    pub fn of(v: &cell_core::reply::Verdict) -> Self {
        if v.limited {
            Outcome::Limited
        } else {
            Outcome::Allowed
        }
    }
}

impl Stats {
    pub const fn new() -> Self {
        Self {
            calls: AtomicU64::new(0),
            allowed: AtomicU64::new(0),
            limited: AtomicU64::new(0),
            shadow_refused: AtomicU64::new(0),
            errors: AtomicU64::new(0),
        }
    }

    pub fn record(&self, outcome: Outcome) {
        bump(&self.calls);
        let counter = match outcome {
            Outcome::Allowed => &self.allowed,
            Outcome::Limited => &self.limited,
            Outcome::ShadowRefused => &self.shadow_refused,
            Outcome::Error => &self.errors,
            Outcome::Done => return,
        };
        bump(counter);
    }

    /// `(calls, allowed, limited, shadow_refused, errors)`.
    pub fn read(&self) -> [(&'static str, u64); 5] {
        [
            ("calls", self.calls.load(Relaxed)),
            ("allowed", self.allowed.load(Relaxed)),
            ("limited", self.limited.load(Relaxed)),
            ("shadow_refused", self.shadow_refused.load(Relaxed)),
            ("errors", self.errors.load(Relaxed)),
        ]
    }
}

/// One more on a counter only the main thread writes.
fn bump(counter: &AtomicU64) {
    counter.store(counter.load(Relaxed).wrapping_add(1), Relaxed);
}
