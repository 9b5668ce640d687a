//! The five-integer reply shared by every command, and the one place where
//! nanosecond durations become whole seconds and sentinels.

use crate::{NANOS_PER_MILLI, NANOS_PER_SEC};

/// What every limiter answers, in nanoseconds, before formatting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// Whether the request was refused.
    pub limited: bool,
    /// The maximum quantity the key admits at once.
    pub limit: i64,
    /// What is left after this call, within `[0, limit]`.
    pub remaining: i64,
    /// How long to wait before this request would fit: `None` when it was
    /// allowed, or when it can never fit.
    pub retry_after: Option<i64>,
    /// How long until the key is back to its full limit.
    pub reset_after: i64,
}

/// The unit of the durations in a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Unit {
    /// Whole seconds, rounded as the original redis-cell rounds.
    #[default]
    Seconds,
    /// Whole milliseconds, rounded up (the `MS` flag).
    Millis,
}

impl Unit {
    /// A duration in nanoseconds in this unit, by the reply rules.
    pub fn of(self, nanos: i64) -> i64 {
        match self {
            Unit::Seconds => whole_seconds_rounded_up(nanos),
            Unit::Millis => millis_rounded_up(nanos),
        }
    }

    /// A duration in nanoseconds in this unit, rounded up: a caller that
    /// sleeps this long is never early (a reservation's wait).
    pub fn ceil(self, nanos: i64) -> i64 {
        match self {
            Unit::Seconds => ceil_div(nanos, NANOS_PER_SEC),
            Unit::Millis => millis_rounded_up(nanos),
        }
    }
}

impl Verdict {
    /// `[limited, limit, remaining, retry_after, reset_after]` with durations
    /// in whole seconds and `-1` for "no retry time".
    pub fn to_reply(&self) -> [i64; 5] {
        self.to_reply_in(Unit::Seconds)
    }

    /// The reply with durations in `unit`.
    pub fn to_reply_in(&self, unit: Unit) -> [i64; 5] {
        [
            i64::from(self.limited),
            self.limit,
            self.remaining,
            self.retry_after.map_or(-1, |r| unit.of(r)),
            unit.of(self.reset_after),
        ]
    }
}

/// Which of several limiters' verdicts answers for all of them (its index):
/// when all allowed, the one with the least `remaining`; otherwise the
/// refusing one with the longest wait, "never fits" counting as longer than
/// any wait. Ties go to the first. `None` for no verdicts.
pub fn binding(verdicts: &[Verdict]) -> Option<usize> {
    binding_of(verdicts.iter().copied()).map(|(i, _)| i)
}

/// [`binding`] over any sequence of verdicts: the index and the verdict.
pub fn binding_of(verdicts: impl Iterator<Item = Verdict>) -> Option<(usize, Verdict)> {
    let wait = |v: &Verdict| match v.retry_after {
        // A refusal without a wait can never fit.
        None => i128::MAX,
        Some(r) => i128::from(r),
    };
    let mut best: Option<(usize, Verdict)> = None;
    for (i, v) in verdicts.enumerate() {
        let better = match &best {
            None => true,
            Some((_, b)) if v.limited != b.limited => v.limited,
            Some((_, b)) if v.limited => wait(&v) > wait(b),
            Some((_, b)) => v.remaining < b.remaining,
        };
        if better {
            best = Some((i, v));
        }
    }
    best
}

/// Whole milliseconds of a duration, rounded up, so that a caller that
/// waits this long is never early.
pub fn millis_rounded_up(nanos: i64) -> i64 {
    ceil_div(nanos, NANOS_PER_MILLI)
}

/// `nanos / unit`, rounded up for a positive remainder (toward zero below 0).
fn ceil_div(nanos: i64, unit: i64) -> i64 {
    nanos / unit + i64::from(nanos % unit > 0)
}

/// Whole seconds of a duration, truncated toward zero, plus one when at
/// least one millisecond is left over: 10 s gives 10, 10.0005 s gives 10,
/// 10.001 s gives 11 (the original redis-cell's rule). A caller that waits
/// this long can be early by up to a millisecond, and a wait under 1 ms
/// reads 0; the `MS` unit has neither flaw.
pub fn whole_seconds_rounded_up(nanos: i64) -> i64 {
    let secs = nanos / NANOS_PER_SEC;
    let millis = (nanos % NANOS_PER_SEC) / NANOS_PER_MILLI;
    if millis > 0 {
        secs + 1
    } else {
        secs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rounding_rule() {
        assert_eq!(whole_seconds_rounded_up(10 * NANOS_PER_SEC), 10);
        assert_eq!(whole_seconds_rounded_up(10 * NANOS_PER_SEC + 500_000), 10);
        assert_eq!(whole_seconds_rounded_up(10 * NANOS_PER_SEC + 1_000_000), 11);
        assert_eq!(whole_seconds_rounded_up(0), 0);
        assert_eq!(whole_seconds_rounded_up(999_999), 0);
        assert_eq!(whole_seconds_rounded_up(1_000_000), 1);
        assert_eq!(whole_seconds_rounded_up(-1_500_000_000), -1);
        assert_eq!(whole_seconds_rounded_up(i64::MAX), 9_223_372_037);
        assert_eq!(whole_seconds_rounded_up(i64::MIN), -9_223_372_036);
    }

    #[test]
    fn milliseconds_round_up() {
        assert_eq!(millis_rounded_up(0), 0);
        assert_eq!(millis_rounded_up(1), 1);
        assert_eq!(millis_rounded_up(NANOS_PER_MILLI), 1);
        assert_eq!(millis_rounded_up(NANOS_PER_MILLI + 1), 2);
        assert_eq!(millis_rounded_up(10 * NANOS_PER_SEC + 500_000), 10_001);
        assert_eq!(millis_rounded_up(i64::MAX), 9_223_372_036_855);
        assert_eq!(millis_rounded_up(-1_500_000), -1);
    }

    fn v(limited: bool, remaining: i64, retry_after: Option<i64>) -> Verdict {
        Verdict {
            limited,
            limit: 10,
            remaining,
            retry_after,
            reset_after: 0,
        }
    }

    #[test]
    fn the_binding_limiter() {
        assert_eq!(binding(&[]), None);
        let all_allowed = [v(false, 5, None), v(false, 2, None), v(false, 2, None)];
        assert_eq!(binding(&all_allowed), Some(1));
        let refused = [
            v(false, 0, None),
            v(true, 0, Some(5)),
            v(true, 0, Some(9)),
            v(true, 0, Some(9)),
        ];
        assert_eq!(binding(&refused), Some(2));
        let never = [
            v(true, 0, Some(i64::MAX)),
            v(true, 3, None),
            v(true, 0, None),
        ];
        assert_eq!(binding(&never), Some(1));
    }

    proptest! {
        /// The binding verdict is refused iff any is, has the longest wait
        /// among the refused (or the least remaining among all, when none
        /// is), and no earlier verdict ties with it.
        #[test]
        fn binding_is_the_tightest(
            vs in prop::collection::vec((any::<bool>(), 0i64..5, prop::option::of(0i64..5)), 1..8)
        ) {
            let vs: Vec<Verdict> = vs.into_iter().map(|(l, r, w)| v(l, r, if l { w } else { None })).collect();
            let b = binding(&vs).unwrap();
            let any_refused = vs.iter().any(|x| x.limited);
            prop_assert_eq!(vs[b].limited, any_refused);
            let key = |x: &Verdict| if any_refused {
                if !x.limited { i128::MIN } else { x.retry_after.map_or(i128::MAX, i128::from) }
            } else {
                -i128::from(x.remaining)
            };
            for (i, x) in vs.iter().enumerate() {
                prop_assert!(key(x) <= key(&vs[b]));
                if i < b {
                    prop_assert!(key(x) < key(&vs[b]));
                }
            }
        }

        /// A duration in ms is never shorter than the duration, and less
        /// than a millisecond longer; the seconds rule is never more than
        /// a millisecond short.
        #[test]
        fn millis_never_early(n in 0i64..i64::MAX) {
            let ms = millis_rounded_up(n);
            prop_assert!(i128::from(ms) * i128::from(NANOS_PER_MILLI) >= i128::from(n));
            prop_assert!(i128::from(ms - 1) * i128::from(NANOS_PER_MILLI) < i128::from(n));
            let s = whole_seconds_rounded_up(n);
            prop_assert!(i128::from(s) * i128::from(NANOS_PER_SEC) + i128::from(NANOS_PER_MILLI) > i128::from(n));
        }
    }

    #[test]
    fn sentinel() {
        let v = Verdict {
            limited: true,
            limit: 3,
            remaining: 0,
            retry_after: None,
            reset_after: 0,
        };
        assert_eq!(v.to_reply(), [1, 3, 0, -1, 0]);
    }
}
