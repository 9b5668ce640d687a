//! GCRA: the reference transcripts, a differential test against a
//! floating-point model of the original, and the algorithm's invariants.

use cell_core::gcra::{Decision, Gcra};
use cell_core::{ParamError, NANOS_PER_MILLI, NANOS_PER_SEC};
use proptest::prelude::*;

const T0: i64 = 1_700_000_000 * NANOS_PER_SEC;
const S: i64 = NANOS_PER_SEC;

/// Runs one request like the module does: decide, then store on success.
fn call(g: &Gcra, state: &mut Option<i64>, now: i64, quantity: i64) -> [i64; 5] {
    let (decision, verdict) = g.decide(*state, now, quantity).unwrap();
    if let Decision::Allowed { tat, .. } = decision {
        *state = Some(tat);
    }
    verdict.to_reply()
}

#[test]
fn transcript_frozen_clock() {
    let g = Gcra::new(2, 1, 10 * S).unwrap();
    let mut tat = None;
    assert_eq!(call(&g, &mut tat, T0, 1), [0, 3, 2, -1, 10]);
    assert_eq!(call(&g, &mut tat, T0, 1), [0, 3, 1, -1, 20]);
    assert_eq!(call(&g, &mut tat, T0, 1), [0, 3, 0, -1, 30]);
    assert_eq!(call(&g, &mut tat, T0, 1), [1, 3, 0, 10, 30]);
    assert_eq!(tat, Some(1_700_000_030_000_000_000));
    assert_eq!(call(&g, &mut tat, T0 + 9_999_000_000, 1), [1, 3, 0, 1, 21]);
    assert_eq!(call(&g, &mut tat, T0 + 10 * S, 1), [0, 3, 0, -1, 30]);
    assert_eq!(tat, Some(1_700_000_040_000_000_000));
    assert_eq!(call(&g, &mut tat, T0 + 40 * S + 1, 1), [0, 3, 2, -1, 10]);
    assert_eq!(tat, Some(1_700_000_050_000_000_001));
}

#[test]
fn expiry_is_the_full_bucket_instant_in_milliseconds() {
    let g = Gcra::new(2, 1, 10 * S).unwrap();
    let (d, _) = g.decide(None, T0 + 1_500_000, 1).unwrap();
    assert_eq!(
        d,
        Decision::Allowed {
            tat: T0 + 1_500_000 + 10 * S,
            expire_at_ms: 1_700_000_010_001
        }
    );
}

#[test]
fn transcript_burst() {
    let g = Gcra::new(15, 30, 60 * S).unwrap();
    let mut tat = None;
    for i in 1..=16 {
        assert_eq!(call(&g, &mut tat, T0, 1), [0, 16, 16 - i, -1, 2 * i]);
    }
    for _ in 0..4 {
        assert_eq!(call(&g, &mut tat, T0, 1), [1, 16, 0, 2, 32]);
    }
}

#[test]
fn transcript_zero_burst() {
    let g = Gcra::new(0, 1, S).unwrap();
    let mut tat = None;
    assert_eq!(call(&g, &mut tat, T0, 1), [0, 1, 0, -1, 1]);
    assert_eq!(call(&g, &mut tat, T0, 1), [1, 1, 0, 1, 1]);
}

#[test]
fn transcript_quantities() {
    let g = Gcra::new(15, 30, 60 * S).unwrap();
    assert_eq!(call(&g, &mut None, T0, 0), [0, 16, 16, -1, 0]);
    assert_eq!(call(&g, &mut None, T0, 16), [0, 16, 0, -1, 32]);
    for q in [17, 100] {
        let mut tat = None;
        assert_eq!(call(&g, &mut tat, T0, q), [1, 16, 16, -1, 0]);
        assert_eq!(tat, None);
    }
}

#[test]
fn rejects_what_cannot_be_computed() {
    assert_eq!(
        Gcra::new(0, 2_000_000_000, S),
        Err(ParamError::ZeroEmissionInterval)
    );
    assert_eq!(Gcra::new(i64::MAX, 1, S), Err(ParamError::Overflow));
    assert_eq!(Gcra::new(10, 1, i64::MAX), Err(ParamError::Overflow));
    let g = Gcra::new(1, 1, S).unwrap();
    assert_eq!(g.decide(None, T0, i64::MAX), Err(ParamError::Overflow));
}

/// The original module's algorithm written plainly, floating point
/// included, as the reference for differential tests.
fn reference(
    burst: i64,
    count: i64,
    period: i64,
    stored: Option<i64>,
    now: i64,
    q: i64,
) -> (bool, i64, i128, i128, Option<i128>) {
    let t = ((period as f64) / (count as f64)) as i64 as i128;
    let dvt = t * (burst as i128 + 1);
    let inc = t * q as i128;
    let now = now as i128;
    let tat = stored.map_or(now, |v| v as i128);
    let new_tat = if now > tat { now + inc } else { tat + inc };
    let allow_at = new_tat - dvt;
    let diff = now - allow_at;
    let (limited, ttl, retry) = if diff < 0 {
        let retry = if inc <= dvt { Some(-diff) } else { None };
        (true, tat - now, retry)
    } else {
        (false, new_tat - now, None)
    };
    let next = dvt - ttl;
    let mut remaining = 0;
    if next > -t {
        remaining = ((next / 1000) as f64 / (t / 1000) as f64) as i64;
    }
    (limited, remaining, ttl, new_tat, retry)
}

/// A limiter of a burst under 20, under 50 a period of up to 100 s in whole
/// milliseconds, with its burst.
fn small_limits() -> impl Strategy<Value = (i64, Gcra)> {
    (0i64..20, 1i64..50, 1i64..100_000).prop_map(|(burst, count, period_ms)| {
        (
            burst,
            Gcra::new(burst, count, period_ms * NANOS_PER_MILLI).unwrap(),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Any sequence of valid calls gives the original's replies and state.
    #[test]
    fn agrees_with_the_original(
        burst in 0i64..50,
        count in 1i64..100,
        period_s in 1i64..3600,
        calls in prop::collection::vec((0i64..5_000_000_000, 0i64..8), 1..60),
    ) {
        let period = period_s * S;
        let g = Gcra::new(burst, count, period).unwrap();
        let mut state = None;
        let mut now = T0;
        for (dt, q) in calls {
            now += dt;
            // The store drops the key once its millisecond expiry has passed.
            if let Some(tat) = state {
                if now / NANOS_PER_MILLI > tat / NANOS_PER_MILLI { state = None; }
            }
            let (limited, remaining, ttl, new_tat, retry) =
                reference(burst, count, period, state, now, q);
            let (decision, verdict) = g.decide(state, now, q).unwrap();
            prop_assert_eq!(verdict.limited, limited);
            prop_assert_eq!(verdict.remaining, remaining);
            prop_assert_eq!(verdict.reset_after as i128, ttl.max(0));
            prop_assert_eq!(verdict.retry_after.map(i128::from), retry);
            if let Decision::Allowed { tat, .. } = decision {
                prop_assert_eq!(tat as i128, new_tat);
                state = Some(tat);
            }
        }
    }

    /// Over any span of admitted requests, the admitted quantity is at most
    /// what the rate earns in that span plus the burst.
    #[test]
    fn never_admits_more_than_the_bound(
        (_, g) in small_limits(),
        calls in prop::collection::vec((0i64..2_000_000_000, 0i64..6), 1..80),
    ) {
        let mut state = None;
        let mut now = T0;
        let mut admitted: Vec<(i64, i64)> = Vec::new();
        for (dt, q) in calls {
            now += dt;
            let (decision, verdict) = g.decide(state, now, q).unwrap();
            prop_assert!((0..=g.limit()).contains(&verdict.remaining));
            if let Decision::Allowed { tat, .. } = decision {
                state = Some(tat);
                admitted.push((now, q));
            }
        }
        for i in 0..admitted.len() {
            let mut sum = 0i128;
            for j in i..admitted.len() {
                sum += admitted[j].1 as i128;
                let span = (admitted[j].0 - admitted[i].0) as i128;
                prop_assert!(sum * g.emission() as i128 <= span + g.tolerance() as i128);
            }
        }
    }

    /// A refused request retried exactly after `retry_after` is admitted,
    /// and a peek changes nothing that a later request can observe.
    #[test]
    fn retry_after_is_exact_and_peeks_are_invisible(
        (burst, g) in small_limits(),
        calls in prop::collection::vec((0i64..500_000_000, 1i64..6), 1..60),
    ) {
        let mut state = None;
        let mut now = T0;
        for (dt, q) in calls {
            now += dt;
            let (peek, _) = g.decide(state, now, 0).unwrap();
            let peeked_state = match peek { Decision::Allowed { tat, .. } => Some(tat), _ => state };
            prop_assert_eq!(g.decide(peeked_state, now, q), g.decide(state, now, q));
            let (decision, _) = g.decide(state, now, q).unwrap();
            match decision {
                Decision::Allowed { tat, .. } => state = Some(tat),
                Decision::Limited { retry_after } => {
                    prop_assert!(retry_after > 0);
                    let (later, _) = g.decide(state, now + retry_after, q).unwrap();
                    let ok = matches!(later, Decision::Allowed { .. }); prop_assert!(ok);
                    let (earlier, _) = g.decide(state, now + retry_after - 1, q).unwrap();
                    let ok = matches!(earlier, Decision::Allowed { .. }); prop_assert!(!ok);
                }
                Decision::NeverFits => prop_assert!(q > burst + 1),
            }
        }
    }

    /// No input, however hostile, makes the arithmetic panic.
    #[test]
    fn never_panics(
        burst in any::<i64>(), count in any::<i64>(), period in any::<i64>(),
        stored in any::<Option<i64>>(), now in any::<i64>(), q in any::<i64>(),
    ) {
        if let Ok(g) = Gcra::new(burst, count, period) {
            if let Ok((_, verdict)) = g.decide(stored, now, q) {
                let _ = verdict.to_reply();
                prop_assert!((0..=g.limit()).contains(&verdict.remaining));
            }
        }
    }
}

mod reserve_and_refund {
    use super::*;
    use cell_core::gcra::{Refund, Reservation};

    #[test]
    fn a_reservation_takes_the_next_slot() {
        // 10 per second, bursts of 2: T = 100 ms, DVT = 200 ms.
        let g = Gcra::new(1, 10, S).unwrap();
        let mut tat = None;
        for expected_wait in [None, None, Some(100), Some(200), Some(300)] {
            match g.reserve(tat, T0, 1, 300 * NANOS_PER_MILLI).unwrap() {
                Reservation::Now(Decision::Allowed { tat: t, .. }, _) => {
                    assert_eq!(expected_wait, None);
                    tat = Some(t);
                }
                Reservation::Later {
                    tat: t,
                    wait,
                    verdict,
                    ..
                } => {
                    assert_eq!(Some(wait / NANOS_PER_MILLI), expected_wait);
                    assert_eq!(verdict.remaining, 0);
                    assert!(!verdict.limited);
                    tat = Some(t);
                }
                other => panic!("{other:?}"),
            }
        }
        // The next slot is 400 ms away: beyond MAXWAIT, refused as
        // CL.THROTTLE refuses, and nothing is taken.
        let r = g.reserve(tat, T0, 1, 300 * NANOS_PER_MILLI).unwrap();
        assert_eq!(
            r,
            Reservation::Now(
                g.decide(tat, T0, 1).unwrap().0,
                g.decide(tat, T0, 1).unwrap().1
            )
        );
        assert!(
            matches!(r, Reservation::Now(Decision::Limited { retry_after }, _) if retry_after == 400 * NANOS_PER_MILLI)
        );
        // Too large ever to fit.
        assert!(matches!(
            g.reserve(None, T0, 3, i64::MAX).unwrap(),
            Reservation::Now(Decision::NeverFits, _)
        ));
    }

    proptest! {
        /// Reservations and throttles mixed on one bucket never admit more
        /// than the rate over any interval: between any two admissions
        /// (at `now + wait`), the quantity admitted is at most the interval
        /// over T plus the burst. MAXWAIT is never exceeded.
        #[test]
        fn never_more_than_the_rate(
            burst in 0i64..5,
            period_ms in 1i64..2_000,
            calls in prop::collection::vec((0i64..300, 1i64..4, 0i64..1_000, any::<bool>()), 1..120),
        ) {
            let g = Gcra::new(burst, 1, period_ms * NANOS_PER_MILLI).unwrap();
            let mut tat = None;
            let mut now = T0;
            let mut admitted: Vec<(i64, i64)> = Vec::new();
            for (dt_ms, q, max_wait_ms, reserve) in calls {
                now += dt_ms * NANOS_PER_MILLI;
                let max_wait = if reserve { max_wait_ms * NANOS_PER_MILLI } else { 0 };
                match g.reserve(tat, now, q, max_wait).unwrap() {
                    Reservation::Now(Decision::Allowed { tat: t, .. }, _) => {
                        tat = Some(t);
                        admitted.push((now, q));
                    }
                    Reservation::Later { tat: t, wait, .. } => {
                        prop_assert!(wait > 0 && wait <= max_wait);
                        tat = Some(t);
                        admitted.push((now + wait, q));
                    }
                    Reservation::Now(_, v) => prop_assert!(v.limited),
                }
            }
            admitted.sort();
            let t = i128::from(g.emission());
            for i in 0..admitted.len() {
                let mut sum = 0i128;
                for j in i..admitted.len() {
                    sum += i128::from(admitted[j].1);
                    let span = i128::from(admitted[j].0 - admitted[i].0);
                    prop_assert!(
                        sum * t <= span + i128::from(g.tolerance()),
                        "{} admitted in {} ns", sum, span
                    );
                }
            }
        }

        /// A refund of what was just admitted restores the previous state:
        /// the same TAT, or an empty key where the bucket was full.
        #[test]
        fn refund_undoes_an_admission(
            burst in 0i64..20,
            count in 1i64..50,
            stored in prop::option::of(-5_000i64..5_000),
            q in 0i64..5,
            dt in 0i64..1_000,
        ) {
            let g = Gcra::new(burst, count, S).unwrap();
            let now = T0 + dt * NANOS_PER_MILLI;
            let before = stored.map(|ms| now + ms * NANOS_PER_MILLI);
            if let (Decision::Allowed { tat, .. }, _) = g.decide(before, now, q).unwrap() {
                let after = match g.refund(tat, now, q) {
                    Refund::Empty => None,
                    Refund::Unchanged => Some(tat),
                    Refund::Store { tat, .. } => Some(tat),
                };
                // A TAT at or before now is a full bucket, like no key.
                let full = |t: Option<i64>| t.filter(|&t| t > now);
                prop_assert_eq!(full(after), full(before));
            }
        }
    }
}
