//! Exact sliding window log.
//!
//! A request of `quantity` at `now` is allowed when the quantities recorded
//! at times in `(now - window, now]`, plus `quantity`, do not exceed `limit`.
//! Only allowed requests are recorded, one entry each whatever their
//! quantity. The log itself ([`Log`]) keeps its entries in chunks with
//! summaries, so that every decision costs O(1) amortised and O(chunk) at
//! worst, however many requests the window holds.

mod log;

use crate::reply::Verdict;
use crate::ParamError;
pub use log::{Log, LogError, CHUNK_BYTES};
use std::marker::PhantomData;

/// Validated parameters of one sliding window limit, decided by the
/// algorithm `A`: the exact log ([`SlidingWindow`]) or the counter that
/// approximates it ([`crate::sliding_approx::ApproxWindow`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window<A> {
    pub(crate) limit: i64,
    pub(crate) window: i64,
    algorithm: PhantomData<A>,
}

/// The exact sliding window log, as an algorithm of [`Window`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exact {}

/// A sliding window decided with the log.
pub type SlidingWindow = Window<Exact>;

/// What the log decides for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Admitted: when `record_at` is set (quantity above 0), drop entries at
    /// or before `now - window` and append the request at that time.
    Allowed { record_at: Option<i64> },
    /// Refused; enough entries leave the window for it after `retry_after`.
    Limited { retry_after: i64 },
    /// Refused; the request is larger than the limit (or the limit is 0).
    NeverFits,
}

impl<A> Window<A> {
    /// `limit >= 0` and `window >= 1` (nanoseconds).
    pub fn new(limit: i64, window: i64) -> Result<Self, ParamError> {
        if limit < 0 || window < 1 {
            return Err(ParamError::Overflow);
        }
        Ok(Self {
            limit,
            window,
            algorithm: PhantomData,
        })
    }

    pub fn window(&self) -> i64 {
        self.window
    }
}

impl SlidingWindow {
    /// Whether a call at `now` stays within 64-bit nanoseconds: a request
    /// recorded now leaves the window at `now + window` (see
    /// [`crate::within_64_bits`]). [`SlidingWindow::decide`] assumes it.
    pub fn check(&self, now: i64) -> Result<(), ParamError> {
        check(self.window, now)
    }

    /// Decides a request without changing the log.
    pub fn decide(&self, log: &Log, now: i64, quantity: i64) -> (Decision, Verdict) {
        let cutoff = now.saturating_sub(self.window);
        let in_window = log.total() - log.quantity_until(cutoff);
        let newest_live = log.newest().filter(|&newest| newest > cutoff);

        let fits = self.limit > 0 && quantity <= self.limit;
        let decision = if !fits || quantity < 0 {
            Decision::NeverFits
        } else if i128::from(in_window) + i128::from(quantity) <= i128::from(self.limit) {
            let record_at = (quantity > 0).then(|| now.max(log.newest().unwrap_or(now)).max(0));
            Decision::Allowed { record_at }
        } else {
            // The oldest live entries must leave until the rest plus this
            // request fit: the entry that completes `need` sets the time.
            // quantity <= limit here, so this cannot overflow.
            let need = in_window - (self.limit - quantity);
            let at = log.time_freeing(cutoff, need).unwrap_or(now);
            let retry_after = at.saturating_add(self.window).saturating_sub(now).max(1);
            Decision::Limited { retry_after }
        };

        let (used, newest) = match decision {
            Decision::Allowed {
                record_at: Some(at),
            } => (in_window.saturating_add(quantity), Some(at)),
            _ => (in_window, newest_live),
        };
        let verdict = Verdict {
            limited: !matches!(decision, Decision::Allowed { .. }),
            limit: self.limit,
            remaining: self.limit.saturating_sub(used).clamp(0, self.limit),
            retry_after: match decision {
                Decision::Limited { retry_after } => Some(retry_after),
                _ => None,
            },
            reset_after: newest.map_or(0, |ts| {
                ts.saturating_add(self.window).saturating_sub(now).max(0)
            }),
        };
        (decision, verdict)
    }
}

/// What [`SlidingWindow::allow`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allow {
    /// Admitted and recorded at `at`, as [`record`] records it.
    Recorded { verdict: Verdict, at: i64 },
    /// Decided only, as [`SlidingWindow::decide`] decides; the log is
    /// unchanged and the caller records an admission itself.
    Decided(Decision, Verdict),
}

impl SlidingWindow {
    /// [`SlidingWindow::decide`], then [`record`] when the request is
    /// admitted, in one pass for the common case: nothing in the log has
    /// left the window of the instant recorded at, and the request is
    /// admitted with a quantity above 0. Every other case (a refusal, a
    /// peek, entries to drop, an instant or a total at the edge of 64
    /// bits) is only decided, with the log unchanged. Assumes
    /// [`SlidingWindow::check`] as `decide` does.
    pub fn allow(&self, log: &mut Log, now: i64, quantity: i64) -> Allow {
        let newest = log.newest();
        let at = now.max(newest.unwrap_or(now)).max(0);
        let total = log.total();
        let admitted = quantity > 0
            && quantity <= self.limit
            && total <= self.limit - quantity
            && log.oldest().is_none_or(|oldest| oldest > at - self.window)
            && at.checked_add(self.window).is_some();
        if !admitted {
            let (decision, verdict) = self.decide(log, now, quantity);
            return Allow::Decided(decision, verdict);
        }
        // Nothing left the window at `at` (so none at `now <= at` either):
        // every entry counts, and recording drops none. The checks above
        // are those of `record`, which cannot fail here.
        if log.push(at, quantity).is_err() {
            let (decision, verdict) = self.decide(log, now, quantity);
            return Allow::Decided(decision, verdict);
        }
        let used = total + quantity;
        let verdict = Verdict {
            limited: false,
            limit: self.limit,
            remaining: self.limit - used,
            retry_after: None,
            reset_after: (at + self.window).saturating_sub(now).max(0),
        };
        Allow::Recorded { verdict, at }
    }
}

/// Whether a request recorded at `at` leaves a window of `window` ns
/// within 64-bit nanoseconds (see [`crate::within_64_bits`]).
pub fn check(window: i64, at: i64) -> Result<(), ParamError> {
    crate::within_64_bits(i128::from(at) + i128::from(window))
}

/// Applies an allowed request: drops what left the window at `at` and
/// records the request. The same call replays the effect on replicas. On
/// error the log is unchanged.
pub fn record(log: &mut Log, window: i64, at: i64, quantity: i64) -> Result<(), LogError> {
    if quantity < 1 || at < 0 || log.newest().is_some_and(|newest| at < newest) {
        return Err(LogError::BadEntry);
    }
    check(window, at).map_err(|_| LogError::Overflow)?;
    let cutoff = at.saturating_sub(window);
    // What stays after the purge plus `quantity` must fit in 64 bits; only
    // when the whole log plus `quantity` would not is it worth counting.
    if log.total().checked_add(quantity).is_none() {
        (log.total() - log.quantity_until(cutoff))
            .checked_add(quantity)
            .ok_or(LogError::Overflow)?;
    }
    log.purge(cutoff);
    log.push(at, quantity)
}

/// Gives back `quantity` at `at`: drops what left the window at `at`, then
/// removes `quantity` from the newest requests (newest first; an entry
/// holding more is reduced). The same call replays the effect on replicas.
pub fn unrecord(log: &mut Log, window: i64, at: i64, quantity: i64) -> Result<(), LogError> {
    if quantity < 1 || at < 0 || window < 1 {
        return Err(LogError::BadEntry);
    }
    log.purge(at.saturating_sub(window));
    log.take_newest(quantity);
    Ok(())
}

/// When the key can expire: the instant its newest entry leaves the window,
/// in milliseconds (the key outlives the entry by under 1 ms).
pub fn expire_at_ms(log: &Log, window: i64) -> Option<i64> {
    log.newest()
        .map(|ts| ts.saturating_add(window) / crate::NANOS_PER_MILLI)
}
