//! Fixed window counter: at most `limit` per window, the window starting at
//! the first allowed request on an absent key (the INCR + EXPIRE pattern),
//! or, aligned, at multiples of `window` since the epoch, or a calendar
//! period (day, month, ...) at a fixed offset from UTC or in a named time
//! zone.
//!
//! The state is what an INCR + EXPIRE counter holds: an integer count and
//! the key's expiry, which is the end of its window.

use crate::calendar::{self, Unit};
use crate::reply::Verdict;
use crate::saturate;
use crate::zoned::{self, TimeZone};
use crate::{ParamError, NANOS_PER_MILLI};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixedWindow {
    limit: i64,
    span: Span,
    /// `COUNTALL`: every hit is counted, refused or not, as `INCRBY`
    /// counts it (the reference libraries' and envoyproxy/ratelimit's
    /// fixed windows), and `remaining` goes below 0 by the count over the
    /// limit.
    counting: bool,
}

/// Where a window that starts now ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Span {
    /// `window` ns after its first request.
    Rolling(i64),
    /// At the next multiple of `window` ns since the epoch.
    Aligned(i64),
    /// At the end of the calendar period, `offset` seconds ahead of UTC.
    Calendar(Unit, i64),
    /// At the end of the calendar period in a named time zone.
    Zoned(Unit, TimeZone),
}

/// A counter as found in its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counter {
    pub count: i64,
    /// Absolute expiry in Unix milliseconds; `None` for a key without TTL.
    pub expire_at_ms: Option<i64>,
}

/// What to write back when the call goes ahead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Nothing changes.
    None,
    /// Store `count`, expiring at the end of its window.
    Store { count: i64, expire_at_ms: i64 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub effect: Effect,
    pub verdict: Verdict,
    /// For a counter found without a TTL: the end of its window, to be set
    /// as its expiry whatever happens to the call (allowed, refused by this
    /// limiter or by another one of a `CL.THROTTLEALL`), so that it cannot
    /// block its user forever. A `Store` sets the same expiry.
    pub repair: Option<i64>,
}

impl FixedWindow {
    /// `limit >= 0`, `window >= 1` ns.
    pub fn new(limit: i64, window: i64, align: bool) -> Result<Self, ParamError> {
        if limit < 0 || window < 1 {
            return Err(ParamError::Overflow);
        }
        let span = if align {
            Span::Aligned(window)
        } else {
            Span::Rolling(window)
        };
        Ok(Self {
            limit,
            span,
            counting: false,
        })
    }

    /// Calendar windows: `limit >= 0` per `unit`, in the zone `offset`
    /// seconds ahead of UTC.
    pub fn calendar(limit: i64, unit: Unit, offset: i64) -> Result<Self, ParamError> {
        if limit < 0 {
            return Err(ParamError::Overflow);
        }
        Ok(Self {
            limit,
            span: Span::Calendar(unit, offset),
            counting: false,
        })
    }

    /// Calendar windows: `limit >= 0` per `unit`, in a named time zone.
    pub fn zoned(limit: i64, unit: Unit, zone: TimeZone) -> Result<Self, ParamError> {
        if limit < 0 {
            return Err(ParamError::Overflow);
        }
        Ok(Self {
            limit,
            span: Span::Zoned(unit, zone),
            counting: false,
        })
    }

    /// The same windows, counting every hit (`COUNTALL`) or not.
    pub fn counting(self, counting: bool) -> Self {
        Self { counting, ..self }
    }

    /// Whether every hit is counted, refused or not (`COUNTALL`).
    pub fn counts_all(&self) -> bool {
        self.counting
    }

    /// The end (ns) of a window that would start now.
    fn new_window_end(&self, now: i64) -> i128 {
        match self.span {
            Span::Rolling(w) => i128::from(now) + i128::from(w),
            Span::Aligned(w) => {
                (crate::div_euclid(i128::from(now), i128::from(w)) + 1) * i128::from(w)
            }
            Span::Calendar(unit, offset) => calendar::period_end(now, unit, offset),
            Span::Zoned(unit, ref zone) => zoned::period_end(now, unit, zone),
        }
    }

    /// Whether a call at `now` stays within 64-bit nanoseconds: a window
    /// starting now ends within them (see [`crate::within_64_bits`]).
    /// [`FixedWindow::decide`] and [`FixedWindow::refund`] assume it.
    pub fn check(&self, now: i64) -> Result<(), ParamError> {
        crate::within_64_bits(self.new_window_end(now))
    }

    /// The end (Unix ms, rounded up so a window never ends early) of a
    /// window that would start now.
    fn new_window_end_ms(&self, now: i64) -> i64 {
        let end = self.new_window_end(now);
        let ms = i128::from(NANOS_PER_MILLI);
        saturate(crate::div_euclid(end + ms - 1, ms))
    }

    pub fn decide(&self, found: Option<Counter>, now: i64, quantity: i64) -> Outcome {
        let ms = i128::from(NANOS_PER_MILLI);
        // A key is expired from the first instant of its expiry millisecond,
        // so that a window ends exactly at its boundary.
        let found = found.filter(|c| {
            c.expire_at_ms
                .is_none_or(|e| i128::from(now) < i128::from(e) * ms)
        });
        let end_ms = match found {
            Some(Counter {
                expire_at_ms: Some(e),
                ..
            }) => e,
            _ => self.new_window_end_ms(now),
        };
        let until_end = saturate(i128::from(end_ms) * ms - i128::from(now)).max(0);
        let count = found.map_or(0, |c| c.count);
        let fits = self.limit > 0 && (0..=self.limit).contains(&quantity);
        let new_count = i128::from(count) + i128::from(quantity);

        let (limited, retry_after, count_after, effect) =
            if self.counting && quantity > 0 && new_count <= i128::from(i64::MAX) {
                // Counted whatever the verdict, as INCRBY counts it; a count
                // past 64 bits is refused uncounted below, as never fitting.
                let count_after = new_count as i64;
                let limited = count_after > self.limit;
                let retry_after = (limited && fits).then_some(until_end);
                let effect = Effect::Store {
                    count: count_after,
                    expire_at_ms: end_ms,
                };
                (limited, retry_after, count_after, effect)
            } else if !fits {
                (true, None, count, Effect::None)
            } else if new_count <= i128::from(self.limit) {
                let count_after = new_count as i64;
                let effect = if quantity > 0 {
                    Effect::Store {
                        count: count_after,
                        expire_at_ms: end_ms,
                    }
                } else {
                    Effect::None
                };
                (false, None, count_after, effect)
            } else {
                (true, Some(until_end), count, Effect::None)
            };
        let repair = found.filter(|c| c.expire_at_ms.is_none()).map(|_| end_ms);
        let verdict = Verdict {
            limited,
            limit: self.limit,
            remaining: if self.counting {
                // Below 0 by the count over the limit: the count is
                // `limit - remaining`. (Never above the limit, for a
                // negative count written by someone else.)
                saturate(i128::from(self.limit) - i128::from(count_after)).min(self.limit)
            } else {
                (i128::from(self.limit) - i128::from(count_after)).clamp(0, i128::from(self.limit))
                    as i64
            },
            retry_after,
            reset_after: if count_after > 0 { until_end } else { 0 },
        };
        Outcome {
            effect,
            verdict,
            repair,
        }
    }
}

impl FixedWindow {
    /// Gives back `quantity` to the counter found: its count goes down, not
    /// below 0, keeping the end of its window (a counter found without a
    /// TTL gets the end of a window starting now). `None` when there is
    /// nothing to write: no counter, or a refund of 0. A count of 0 means
    /// the key should go.
    pub fn refund(&self, found: Option<Counter>, now: i64, quantity: i64) -> Option<Counter> {
        let ms = i128::from(NANOS_PER_MILLI);
        let c = found.filter(|c| {
            c.expire_at_ms
                .is_none_or(|e| i128::from(now) < i128::from(e) * ms)
        })?;
        if quantity <= 0 && c.expire_at_ms.is_some() {
            return None;
        }
        Some(Counter {
            count: c.count.saturating_sub(quantity.max(0)).max(0),
            expire_at_ms: Some(
                c.expire_at_ms
                    .unwrap_or_else(|| self.new_window_end_ms(now)),
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NANOS_PER_SEC;
    use proptest::prelude::*;

    const S: i64 = NANOS_PER_SEC;
    const T0: i64 = 1_700_000_040 * S; // a multiple of 60 s

    fn call(fw: &FixedWindow, st: &mut Option<Counter>, now: i64, q: i64) -> [i64; 5] {
        let out = fw.decide(*st, now, q);
        match out.effect {
            Effect::Store {
                count,
                expire_at_ms,
            } => {
                *st = Some(Counter {
                    count,
                    expire_at_ms: Some(expire_at_ms),
                })
            }
            Effect::None => {
                if let (Some(c), Some(e)) = (st.as_mut(), out.repair) {
                    c.expire_at_ms = Some(e);
                }
            }
        }
        out.verdict.to_reply()
    }

    #[test]
    fn window_starts_at_the_first_request() {
        let fw = FixedWindow::new(3, 60 * S, false).unwrap();
        let mut st = None;
        assert_eq!(call(&fw, &mut st, T0 + 10 * S, 1), [0, 3, 2, -1, 60]);
        assert_eq!(call(&fw, &mut st, T0 + 20 * S, 2), [0, 3, 0, -1, 50]);
        assert_eq!(call(&fw, &mut st, T0 + 30 * S, 1), [1, 3, 0, 40, 40]);
        assert_eq!(call(&fw, &mut st, T0 + 30 * S, 4), [1, 3, 0, -1, 40]);
        assert_eq!(call(&fw, &mut st, T0 + 70 * S - 1, 1)[0], 1);
        assert_eq!(call(&fw, &mut st, T0 + 70 * S, 1), [0, 3, 2, -1, 60]);
    }

    #[test]
    fn aligned_windows_share_boundaries() {
        let fw = FixedWindow::new(2, 60 * S, true).unwrap();
        let mut st = None;
        assert_eq!(call(&fw, &mut st, T0 + 45 * S, 1), [0, 2, 1, -1, 15]);
        assert_eq!(call(&fw, &mut st, T0 + 50 * S, 1), [0, 2, 0, -1, 10]);
        assert_eq!(call(&fw, &mut st, T0 + 59 * S, 1), [1, 2, 0, 1, 1]);
        assert_eq!(call(&fw, &mut st, T0 + 60 * S, 1), [0, 2, 1, -1, 60]);
    }

    #[test]
    fn counting_counts_every_hit_as_incrby() {
        let fw = FixedWindow::new(3, 60 * S, false).unwrap().counting(true);
        let mut st = None;
        assert_eq!(call(&fw, &mut st, T0 + 10 * S, 1), [0, 3, 2, -1, 60]);
        assert_eq!(call(&fw, &mut st, T0 + 20 * S, 2), [0, 3, 0, -1, 50]);
        // Refused and counted: remaining says by how much.
        assert_eq!(call(&fw, &mut st, T0 + 30 * S, 1), [1, 3, -1, 40, 40]);
        assert_eq!(st.map(|c| c.count), Some(4));
        // More than the limit at once: never fits, counted all the same.
        assert_eq!(call(&fw, &mut st, T0 + 30 * S, 4), [1, 3, -5, -1, 40]);
        // A peek counts nothing and answers the count over the limit.
        assert_eq!(call(&fw, &mut st, T0 + 40 * S, 0), [1, 3, -5, 30, 30]);
        assert_eq!(
            st,
            Some(Counter {
                count: 8,
                expire_at_ms: Some((T0 + 70 * S) / 1_000_000)
            })
        );
        // The window's end is never moved by the hits counted.
        assert_eq!(call(&fw, &mut st, T0 + 70 * S, 1), [0, 3, 2, -1, 60]);
        // Limit 0: every hit refused and counted.
        let zero = FixedWindow::new(0, 60 * S, false).unwrap().counting(true);
        let mut st = None;
        assert_eq!(call(&zero, &mut st, T0, 2), [1, 0, -2, -1, 60]);
        assert_eq!(st.map(|c| c.count), Some(2));
        // A negative count (a DECR of someone else's) is counted up from,
        // remaining at most the limit, as without COUNTALL.
        let mut st = Some(Counter {
            count: -5,
            expire_at_ms: Some((T0 + 60 * S) / 1_000_000),
        });
        assert_eq!(call(&fw, &mut st, T0, 2), [0, 3, 3, -1, 0]);
        assert_eq!(st.map(|c| c.count), Some(-3));
    }

    #[test]
    fn counting_stops_at_64_bits_without_writing() {
        let fw = FixedWindow::new(3, 60 * S, false).unwrap().counting(true);
        let full = Some(Counter {
            count: i64::MAX - 1,
            expire_at_ms: Some((T0 + 60 * S) / 1_000_000),
        });
        let out = fw.decide(full, T0, 2);
        assert_eq!(out.effect, Effect::None);
        assert!(out.verdict.limited);
        assert_eq!(out.verdict.remaining, 3 - (i64::MAX - 1));
    }

    #[test]
    fn peeks_limit_zero_and_counters_without_ttl() {
        let fw = FixedWindow::new(5, 10 * S, false).unwrap();
        assert_eq!(fw.decide(None, T0, 0).effect, Effect::None);
        assert_eq!(fw.decide(None, T0, 0).verdict.to_reply(), [0, 5, 5, -1, 0]);
        let zero = FixedWindow::new(0, 10 * S, false).unwrap();
        assert_eq!(
            zero.decide(None, T0, 1).verdict.to_reply(),
            [1, 0, 0, -1, 0]
        );
        assert_eq!(
            zero.decide(None, T0, 0).verdict.to_reply(),
            [1, 0, 0, -1, 0]
        );
        let stuck = Some(Counter {
            count: 7,
            expire_at_ms: None,
        });
        let out = fw.decide(stuck, T0, 1);
        assert_eq!(out.verdict.to_reply(), [1, 5, 0, 10, 10]);
        assert_eq!(out.effect, Effect::None);
        let end = T0 / NANOS_PER_MILLI + 10_000;
        assert_eq!(out.repair, Some(end));
        // With room left the counter is admitted, and still repaired:
        // refused by another limiter, the call writes only the repair.
        let room = Some(Counter {
            count: 2,
            expire_at_ms: None,
        });
        let out = fw.decide(room, T0, 1);
        assert_eq!(out.verdict.to_reply(), [0, 5, 2, -1, 10]);
        assert_eq!(
            out.effect,
            Effect::Store {
                count: 3,
                expire_at_ms: end
            }
        );
        assert_eq!(out.repair, Some(end));
        assert_eq!(fw.decide(room, T0, 0).repair, Some(end));
        // A counter with a TTL needs none.
        let fine = Some(Counter {
            count: 2,
            expire_at_ms: Some(end),
        });
        assert_eq!(fw.decide(fine, T0, 1).repair, None);
    }

    proptest! {
        /// Never more than `limit` in one window; refused requests change
        /// nothing; retrying at `retry_after` fits.
        #[test]
        fn holds_per_window(
            limit in 0i64..10,
            window_ms in 1i64..5_000,
            align in any::<bool>(),
            calls in prop::collection::vec((0i64..900_000_000, 0i64..4), 1..100),
        ) {
            let fw = FixedWindow::new(limit, window_ms * NANOS_PER_MILLI, align).unwrap();
            let mut st = None;
            let mut now = T0;
            for (dt, q) in calls {
                now += dt;
                let before = st;
                let out = fw.decide(st, now, q);
                let v = out.verdict;
                prop_assert!((0..=limit).contains(&v.remaining));
                call(&fw, &mut st, now, q);
                if v.limited {
                    prop_assert_eq!(st, before);
                    if let Some(r) = v.retry_after {
                        let later = fw.decide(st, now + r, q);
                        prop_assert!(!later.verdict.limited);
                    }
                }
                if let Some(c) = st {
                    prop_assert!(c.count <= limit);
                }
            }
        }

        #[test]
        fn never_panics(limit in any::<i64>(), window in any::<i64>(), align in any::<bool>(),
                        count in any::<i64>(), exp in any::<Option<i64>>(), now in any::<i64>(), q in any::<i64>()) {
            if let Ok(fw) = FixedWindow::new(limit, window, align) {
                let _ = fw.decide(Some(Counter { count, expire_at_ms: exp }), now, q).verdict.to_reply();
                let _ = fw.decide(None, now, q).verdict.to_reply();
            }
        }
    }
}
