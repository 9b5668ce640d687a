//! GCRA, the generic cell rate algorithm ("leaky bucket as a meter"), with
//! the exact arithmetic of the original redis-cell.
//!
//! State is one integer, the theoretical arrival time (TAT): the instant at
//! which the bucket would be empty again. With emission interval
//! `T = period / count`, tolerance `DVT = T * (max_burst + 1)` and increment
//! `I = T * quantity`, a request at `now` moves the TAT to
//! `max(tat, now) + I` and is allowed when that is at most `now + DVT`.

use crate::compat::{f64_quotient_trunc, whole_micros};
use crate::reply::Verdict;
use crate::saturate;
use crate::{ParamError, NANOS_PER_MILLI};

/// Validated parameters of one throttle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gcra {
    emission: i64,
    tolerance: i64,
    limit: i64,
}

/// What a throttle decides for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Admitted: store `tat` and let the key expire at `expire_at_ms`
    /// (milliseconds since the epoch, the instant the bucket is full again,
    /// truncated to the millisecond as the original does).
    Allowed { tat: i64, expire_at_ms: i64 },
    /// Refused; the same request fits after `retry_after` nanoseconds.
    Limited { retry_after: i64 },
    /// Refused; the request is larger than the bucket and never fits.
    NeverFits,
}

/// What a reservation decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reservation {
    /// Decided as `CL.THROTTLE` decides: admitted now, or refused.
    Now(Decision, Verdict),
    /// Admitted `wait` nanoseconds from now: store `tat`, expiring at
    /// `expire_at_ms`; `verdict` is the state after the reservation.
    Later {
        tat: i64,
        expire_at_ms: i64,
        wait: i64,
        verdict: Verdict,
    },
}

/// What a refund leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refund {
    /// The bucket is full again: delete the key.
    Empty,
    /// Nothing to give back.
    Unchanged,
    /// Store the earlier TAT, expiring when the bucket is full.
    Store { tat: i64, expire_at_ms: i64 },
}

impl Gcra {
    /// Parameters as given to `CL.THROTTLE`: `max_burst >= 0`, `count >= 1`
    /// and `period >= 1` (nanoseconds). Other values are rejected as
    /// overflow; callers report them by name before getting here.
    pub fn new(max_burst: i64, count: i64, period: i64) -> Result<Self, ParamError> {
        if max_burst < 0 || count < 1 || period < 1 {
            return Err(ParamError::Overflow);
        }
        // The original computes the interval in floating point; reproduce
        // its rounding exactly so that replies agree for any period.
        let emission = f64_quotient_trunc(period as u64, count as u64) as i64;
        if emission == 0 {
            return Err(ParamError::ZeroEmissionInterval);
        }
        let limit = max_burst.checked_add(1).ok_or(ParamError::Overflow)?;
        let tolerance = emission.checked_mul(limit).ok_or(ParamError::Overflow)?;
        Ok(Self {
            emission,
            tolerance,
            limit,
        })
    }

    /// Whether a call at `now` stays within 64-bit nanoseconds: the bucket
    /// filled now empties at `now + DVT` (see [`crate::within_64_bits`]).
    pub fn check(&self, now: i64) -> Result<(), ParamError> {
        crate::within_64_bits(i128::from(now) + i128::from(self.tolerance))
    }

    /// `max_burst + 1`.
    pub fn limit(&self) -> i64 {
        self.limit
    }

    /// The emission interval `T`, in nanoseconds.
    pub fn emission(&self) -> i64 {
        self.emission
    }

    /// The tolerance `DVT = T * limit`, in nanoseconds.
    pub fn tolerance(&self) -> i64 {
        self.tolerance
    }

    /// Decides a request of `quantity` at `now` against the stored TAT
    /// (`None` for an absent key). Quantity 0 only looks: it is always
    /// allowed unless the stored state is over the current limit, and it
    /// stores the TAT it found.
    pub fn decide(
        &self,
        stored_tat: Option<i64>,
        now: i64,
        quantity: i64,
    ) -> Result<(Decision, Verdict), ParamError> {
        self.check(now)?;
        let increment = self
            .emission
            .checked_mul(quantity)
            .ok_or(ParamError::Overflow)?;
        let now_w = i128::from(now);
        let tat = i128::from(stored_tat.unwrap_or(now));
        let new_tat = tat.max(now_w) + i128::from(increment);
        let allow_at = new_tat - i128::from(self.tolerance);

        let (decision, ttl) = if now_w < allow_at {
            let decision = if increment <= self.tolerance {
                Decision::Limited {
                    retry_after: saturate(allow_at - now_w),
                }
            } else {
                Decision::NeverFits
            };
            // A key is kept at most until its TAT, so `tat < now` only
            // happens within the last millisecond of its life: report it
            // as empty rather than as more than empty.
            (decision, (tat - now_w).max(0))
        } else {
            let tat = i64::try_from(new_tat).map_err(|_| ParamError::Overflow)?;
            let ttl = new_tat - now_w;
            let decision = Decision::Allowed {
                tat,
                expire_at_ms: expire_at_ms(now, ttl),
            };
            (decision, ttl)
        };

        let verdict = Verdict {
            limited: !matches!(decision, Decision::Allowed { .. }),
            limit: self.limit,
            remaining: self.remaining(ttl),
            retry_after: match decision {
                Decision::Limited { retry_after } => Some(retry_after),
                _ => None,
            },
            reset_after: saturate(ttl),
        };
        Ok((decision, verdict))
    }

    /// Reserves `quantity` at `now` for a caller willing to wait up to
    /// `max_wait` nanoseconds: admitted now exactly as [`Gcra::decide`]
    /// admits; otherwise, when it fits the bucket and its slot comes within
    /// `max_wait`, admitted later: the slot is taken now (the TAT moves as
    /// for an admitted request) and the caller must wait `wait`.
    pub fn reserve(
        &self,
        stored_tat: Option<i64>,
        now: i64,
        quantity: i64,
        max_wait: i64,
    ) -> Result<Reservation, ParamError> {
        let (decision, verdict) = self.decide(stored_tat, now, quantity)?;
        let Decision::Limited { retry_after } = decision else {
            return Ok(Reservation::Now(decision, verdict));
        };
        if retry_after > max_wait {
            return Ok(Reservation::Now(decision, verdict));
        }
        // The slot at `now + retry_after` is taken: the TAT moves exactly as
        // it will when the request is admitted then.
        let increment = i128::from(self.emission) * i128::from(quantity);
        let tat = i128::from(stored_tat.unwrap_or(now).max(now)) + increment;
        let tat = i64::try_from(tat).map_err(|_| ParamError::Overflow)?;
        let ttl = i128::from(tat) - i128::from(now);
        Ok(Reservation::Later {
            tat,
            expire_at_ms: expire_at_ms(now, ttl),
            wait: retry_after,
            verdict: Verdict {
                limited: false,
                limit: self.limit,
                remaining: self.remaining(ttl),
                retry_after: None,
                reset_after: saturate(ttl),
            },
        })
    }

    /// Gives back `quantity` to a bucket whose TAT is `tat`: the TAT moves
    /// back by `T * quantity`, never before `now` (a full bucket).
    pub fn refund(&self, tat: i64, now: i64, quantity: i64) -> Refund {
        let back = i128::from(self.emission) * i128::from(quantity.max(0));
        let new_tat = i128::from(tat) - back;
        if new_tat <= i128::from(now) {
            return Refund::Empty;
        }
        if back == 0 {
            return Refund::Unchanged;
        }
        Refund::Store {
            tat: saturate(new_tat),
            expire_at_ms: expire_at_ms(now, new_tat - i128::from(now)),
        }
    }

    /// How many more requests of quantity 1 fit when the bucket empties in
    /// `ttl`: `(DVT - ttl) / T`, computed on whole microseconds as the
    /// original does (when `T` is at least 1 µs), kept within `[0, limit]`.
    fn remaining(&self, ttl: i128) -> i64 {
        let emission = i128::from(self.emission);
        let next = i128::from(self.tolerance) - ttl;
        if next <= -emission {
            return 0;
        }
        let whole = if emission >= 1_000 {
            crate::div(whole_micros(next), whole_micros(emission))
        } else {
            crate::div(next, emission)
        };
        saturate(whole.clamp(0, i128::from(self.limit)))
    }
}

/// When a key whose bucket empties `ttl` ns after `now` expires (Unix ms):
/// the whole milliseconds of `ttl` after the millisecond of `now`.
fn expire_at_ms(now: i64, ttl: i128) -> i64 {
    saturate(
        i128::from(now.div_euclid(NANOS_PER_MILLI)) + crate::div(ttl, i128::from(NANOS_PER_MILLI)),
    )
}
