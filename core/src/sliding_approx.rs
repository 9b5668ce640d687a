//! Sliding window counter: the constant-memory approximation of the
//! sliding window log, for limits too large to log.
//!
//! Time is cut into fixed windows aligned to multiples of `window` since the
//! epoch. The count in the sliding window ending now is estimated as the
//! current fixed window's count plus the previous one's, weighted by the
//! part of the previous window still inside the sliding window (rounded up).
//!
//! Error bound: the estimate assumes the previous window's requests were
//! spread evenly. It is never below the count of the current fixed window
//! and never more than the previous window's count away from the exact
//! count; in the worst case (the previous window's requests all at its very
//! end) a sliding window can hold up to `2 * limit` admitted, and it can
//! refuse early when they were all at its start. The property tests check
//! the `2 * limit` bound on random streams.

use crate::reply::Verdict;
use crate::saturate;
use crate::sliding::Window;
use crate::ParamError;

/// The counter state: two adjacent fixed windows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counter {
    /// The window length this state was counted with, in nanoseconds.
    pub window: i64,
    /// Index of the current fixed window (`start / window`).
    pub index: i64,
    pub previous: i64,
    pub current: i64,
}

/// The sliding window counter, as an algorithm of [`Window`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approx {}

/// A sliding window decided with the counter.
pub type ApproxWindow = Window<Approx>;

/// What the counter decides for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Admitted; store `counter` when the quantity was above 0.
    Allowed {
        counter: Option<Counter>,
    },
    Limited {
        retry_after: i64,
    },
    NeverFits,
}

impl ApproxWindow {
    /// Whether a call at `now` stays within 64-bit nanoseconds: a state
    /// counted now expires at the end of the window after the current one
    /// (see [`crate::within_64_bits`]). [`ApproxWindow::decide`] assumes it.
    pub fn check(&self, now: i64) -> Result<(), ParamError> {
        check(self.window, now)
    }

    /// The estimated count at `elapsed` nanoseconds into the current window.
    fn estimate(&self, previous: i64, current: i64, elapsed: i64) -> i128 {
        let w = i128::from(self.window);
        let weight = w - i128::from(elapsed);
        let weighted = crate::div(i128::from(previous) * weight + w - 1, w);
        weighted + i128::from(current)
    }

    /// Decides a request at `now`. A clock that went back to before the
    /// state's current window is time that has not passed: the request is
    /// decided as at the start of that window (where the previous window
    /// still weighs fully), and the waits count from `now`.
    pub fn decide(&self, state: Option<Counter>, now: i64, quantity: i64) -> (Decision, Verdict) {
        let c = roll(state, self.window, now);
        let start = i128::from(c.index) * i128::from(self.window);
        let at = i128::from(now).max(start);
        let behind = at - i128::from(now);
        let elapsed = (at - start) as i64;
        let used = self.estimate(c.previous, c.current, elapsed);
        let fits = self.limit > 0 && (0..=self.limit).contains(&quantity);
        let decision = if !fits {
            Decision::NeverFits
        } else if used + i128::from(quantity) <= i128::from(self.limit) {
            let counter = (quantity > 0).then(|| record(Some(c), self.window, now, quantity));
            Decision::Allowed { counter }
        } else {
            Decision::Limited {
                retry_after: saturate(
                    i128::from(self.wait_until_fits(c, elapsed, quantity)) + behind,
                ),
            }
        };
        let after = match decision {
            Decision::Allowed {
                counter: Some(next),
            } => next,
            _ => c,
        };
        let used_after = self.estimate(after.previous, after.current, elapsed);
        let reset_at = if after.current > 0 {
            start + 2 * i128::from(self.window)
        } else if after.previous > 0 {
            start + i128::from(self.window)
        } else {
            i128::from(now)
        };
        let verdict = Verdict {
            limited: !matches!(decision, Decision::Allowed { .. }),
            limit: self.limit,
            remaining: (i128::from(self.limit) - used_after).clamp(0, i128::from(self.limit))
                as i64,
            retry_after: match decision {
                Decision::Limited { retry_after } => Some(retry_after),
                _ => None,
            },
            reset_after: saturate(reset_at - i128::from(now)),
        };
        (decision, verdict)
    }

    /// The first instant the request fits, looking at this window and the
    /// two after it (two windows on, both counts have weight zero).
    fn wait_until_fits(&self, c: Counter, elapsed: i64, quantity: i64) -> i64 {
        let w = i128::from(self.window);
        let windows = [(c.previous, c.current), (c.current, 0), (0, 0)];
        for (k, (previous, current)) in windows.into_iter().enumerate() {
            let room = i128::from(self.limit) - i128::from(quantity) - i128::from(current);
            if room < 0 {
                continue;
            }
            // ceil(previous * (w - e) / w) <= room  <=>  previous * (w - e) <= room * w
            let e = if previous == 0 {
                0
            } else {
                (w - crate::div(room * w, i128::from(previous))).max(0)
            };
            let e = if k == 0 {
                e.max(i128::from(elapsed))
            } else {
                e
            };
            if e < w {
                return saturate(k as i128 * w + e - i128::from(elapsed)).max(1);
            }
        }
        saturate(2 * w - i128::from(elapsed))
    }
}

/// Whether a state counted at `at` in windows of `window` ns expires
/// within 64-bit nanoseconds: at the end of the window after the one
/// holding `at` (see [`crate::within_64_bits`]).
pub fn check(window: i64, at: i64) -> Result<(), ParamError> {
    let w = i128::from(window.max(1));
    crate::within_64_bits((crate::div_euclid(i128::from(at), w) + 2) * w)
}

/// The state as of `now`: rolled forward to the fixed window containing
/// `now`, or empty when it was counted with another window length. A
/// state whose window is after `now`'s (the clock went back) stays as it
/// is: its counts are kept, never forgotten.
pub fn roll(state: Option<Counter>, window: i64, now: i64) -> Counter {
    let index = now.div_euclid(window.max(1));
    let fresh = Counter {
        window,
        index,
        previous: 0,
        current: 0,
    };
    match state {
        Some(c) if c.window == window && c.index >= index => c,
        Some(c) if c.window == window && c.index.checked_add(1) == Some(index) => Counter {
            previous: c.current,
            ..fresh
        },
        _ => fresh,
    }
}

/// Applies an allowed request at `at` (the effect replayed on replicas).
pub fn record(state: Option<Counter>, window: i64, at: i64, quantity: i64) -> Counter {
    let c = roll(state, window, at);
    Counter {
        current: c.current.saturating_add(quantity),
        ..c
    }
}

/// Gives back `quantity` at `at`: lowers the current window's count (not
/// below 0), then the previous window's.
pub fn unrecord(state: Option<Counter>, window: i64, at: i64, quantity: i64) -> Counter {
    let c = roll(state, window, at);
    let from_current = c.current.min(quantity.max(0));
    let from_previous = c.previous.min(quantity.max(0) - from_current);
    Counter {
        current: c.current - from_current,
        previous: c.previous - from_previous,
        ..c
    }
}

impl Counter {
    /// Whether the commands can produce this state: a window of at least
    /// 1 ns, counts of at least 0, a window index of at least 0 (instants
    /// at or after the epoch) and an expiry, the end of the window after
    /// the current one, within 64 bits of nanoseconds.
    pub fn is_valid(&self) -> bool {
        self.window >= 1
            && self.index >= 0
            && self.previous >= 0
            && self.current >= 0
            && i128::from(self.index)
                .checked_add(2)
                .map(|i| i * i128::from(self.window))
                .is_some_and(|end| end <= i128::from(i64::MAX))
    }

    /// When the key can expire: once both counts have weight zero.
    pub fn expire_at_ms(&self) -> i64 {
        let end = (i128::from(self.index) + 2) * i128::from(self.window);
        saturate(crate::div(end, i128::from(crate::NANOS_PER_MILLI)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sliding::{self, Log, SlidingWindow};
    use crate::NANOS_PER_SEC;
    use proptest::prelude::*;

    const S: i64 = NANOS_PER_SEC;
    const T0: i64 = 1_700_000_040 * S; // a multiple of 60 s

    fn call(a: &ApproxWindow, state: &mut Option<Counter>, now: i64, q: i64) -> [i64; 5] {
        let (d, v) = a.decide(*state, now, q);
        if let Decision::Allowed { counter: Some(c) } = d {
            *state = Some(c);
        }
        v.to_reply()
    }

    #[test]
    fn weights_the_previous_window() {
        let a = ApproxWindow::new(10, 60 * S).unwrap();
        let mut st = None;
        for _ in 0..10 {
            call(&a, &mut st, T0 + 30 * S, 1);
        }
        // The next window starts with all 10 weighing in; 9 of them weigh at 66 s.
        assert_eq!(call(&a, &mut st, T0 + 30 * S, 1), [1, 10, 0, 36, 90]);
        // Half way through the next window, half of the 10 still count.
        assert_eq!(call(&a, &mut st, T0 + 90 * S, 1), [0, 10, 4, -1, 90]);
        assert_eq!(call(&a, &mut st, T0 + 90 * S, 4), [0, 10, 0, -1, 90]);
        assert_eq!(call(&a, &mut st, T0 + 90 * S, 1)[0], 1);
    }

    #[test]
    fn a_clock_that_goes_back_forgets_nothing() {
        let a = ApproxWindow::new(5, 60 * S).unwrap();
        let mut st = None;
        // 5 admitted 10 s into a window...
        for _ in 0..5 {
            assert_eq!(call(&a, &mut st, T0 + 70 * S, 1)[0], 0);
        }
        let full = st;
        // ...then the clock steps back into the previous window: still full,
        // decided as at the start of the later window, waits counted from
        // the earlier instant.
        // (One fits once 4 of the 5 weigh, 12 s into the window after.)
        assert_eq!(call(&a, &mut st, T0 + 70 * S, 1), [1, 5, 0, 62, 110]);
        assert_eq!(call(&a, &mut st, T0 + 30 * S, 1), [1, 5, 0, 102, 150]);
        assert_eq!(call(&a, &mut st, T0 - 600 * S, 1), [1, 5, 0, 732, 780]);
        assert_eq!(call(&a, &mut st, T0 + 60 * S, 1), [1, 5, 0, 72, 120]);
        assert_eq!(st, full);
        // A refund while the clock is behind gives back from the kept counts.
        let given = unrecord(full, 60 * S, T0 + 30 * S, 2);
        assert_eq!(
            given,
            Counter {
                current: 3,
                ..full.unwrap()
            }
        );
        // Recording while behind counts in the later window.
        let more = record(Some(given), 60 * S, T0 + 30 * S, 1);
        assert_eq!(
            more,
            Counter {
                current: 4,
                ..given
            }
        );
    }

    proptest! {
        /// With the clock stepping back and forth, the counts are never
        /// lost: a request is admitted only when it fits the counts kept, as
        /// estimated at the latest window seen.
        #[test]
        fn steps_back_never_admit_more(
            limit in 1i64..10,
            window_ms in 1i64..5_000,
            calls in prop::collection::vec((-3_000_000_000i64..3_000_000_000, 0i64..3), 1..100),
        ) {
            let window = window_ms * crate::NANOS_PER_MILLI;
            let a = ApproxWindow::new(limit, window).unwrap();
            let mut st: Option<Counter> = None;
            let mut now = T0;
            for (dt, q) in calls {
                now += dt;
                let before = st;
                let (d, v) = a.decide(st, now, q);
                if let Decision::Allowed { counter: Some(c) } = d {
                    // What is kept never shrinks by a step back, and what is
                    // admitted in one window never passes the limit.
                    if let Some(b) = before {
                        prop_assert!(c.index >= b.index);
                    }
                    prop_assert!(c.current <= limit);
                    st = Some(c);
                }
                if let Some(r) = v.retry_after {
                    prop_assert!(r >= 1);
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Within the documented bound: never more than 2 * limit in any
        /// sliding window; retrying at `retry_after` fits.
        #[test]
        fn within_the_bound(
            limit in 1i64..20,
            window_ms in 1i64..5_000,
            calls in prop::collection::vec((0i64..800_000_000, 0i64..4), 1..150),
        ) {
            let window = window_ms * crate::NANOS_PER_MILLI;
            let a = ApproxWindow::new(limit, window).unwrap();
            let mut st = None;
            let mut now = T0;
            let mut admitted = Vec::new();
            for (dt, q) in calls {
                now += dt;
                let (d, v) = a.decide(st, now, q);
                prop_assert!((0..=limit).contains(&v.remaining));
                match d {
                    Decision::Allowed { counter } => {
                        if let Some(c) = counter { st = Some(c); admitted.push((now, q)); }
                    }
                    Decision::Limited { retry_after } => {
                        let (later, _) = a.decide(st, now + retry_after, q);
                        let ok = matches!(later, Decision::Allowed { .. });
                        prop_assert!(ok);
                    }
                    Decision::NeverFits => prop_assert!(q > limit),
                }
            }
            for &(t, _) in &admitted {
                let n: i64 = admitted.iter().filter(|&&(u, _)| u > t - window && u <= t).map(|&(_, q)| q).sum();
                prop_assert!(n <= 2 * limit);
            }
        }
    }

    proptest! {
        /// No 64-bit input or stored state makes a decision panic.
        #[test]
        fn never_panics(
            limit in any::<i64>(), window in any::<i64>(), now in any::<i64>(), q in any::<i64>(),
            index in any::<i64>(), previous in 0i64..=i64::MAX, current in 0i64..=i64::MAX,
        ) {
            if let Ok(a) = ApproxWindow::new(limit, window) {
                let state = Counter { window, index, previous, current };
                let (_, v) = a.decide(Some(state), now, q);
                prop_assert!(v.remaining >= 0 && v.remaining <= limit);
                let _ = v.to_reply();
                let _ = record(Some(state), window, now, q.max(0)).expire_at_ms();
            }
        }
    }

    /// The approximation against the exact log on one request stream:
    /// their admitted totals differ by a few percent on a steady stream.
    #[test]
    fn close_to_the_exact_log_on_a_steady_stream() {
        let (limit, window) = (100, 10 * S);
        let a = ApproxWindow::new(limit, window).unwrap();
        let sw = SlidingWindow::new(limit, window).unwrap();
        let (mut st, mut log) = (None, Log::new());
        let (mut approx_ok, mut exact_ok) = (0, 0);
        // 15 requests per second against a limit of 10 per second.
        let mut seed = 42u64;
        for i in 0..3000i64 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let now = T0 + i * S / 15 + (seed >> 40) as i64 % (S / 30);
            if call(&a, &mut st, now, 1)[0] == 0 {
                approx_ok += 1;
            }
            let (d, _) = sw.decide(&log, now, 1);
            if let sliding::Decision::Allowed {
                record_at: Some(at),
            } = d
            {
                sliding::record(&mut log, 10 * S, at, 1).unwrap();
                exact_ok += 1;
            }
        }
        let diff = (approx_ok - exact_ok) as f64 / exact_ok as f64;
        assert!(diff.abs() < 0.05, "approx {approx_ok} vs exact {exact_ok}");
    }
}
