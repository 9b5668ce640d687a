//! The exact sliding window log: boundaries, weights, encoding, memory,
//! and its invariants over random call sequences.

use cell_core::sliding::{record, unrecord, Allow, Decision, Log, LogError, SlidingWindow};
use cell_core::{NANOS_PER_MILLI, NANOS_PER_SEC};
use proptest::prelude::*;

const T0: i64 = 1_700_000_000 * NANOS_PER_SEC;
const S: i64 = NANOS_PER_SEC;

/// One call as the module makes it: decide, then record when allowed.
fn call(sw: &SlidingWindow, log: &mut Log, now: i64, q: i64) -> [i64; 5] {
    let (decision, verdict) = sw.decide(log, now, q);
    if let Decision::Allowed {
        record_at: Some(at),
    } = decision
    {
        record(log, sw.window(), at, q).unwrap();
    }
    verdict.to_reply()
}

#[test]
fn entries_leave_the_window_exactly_at_t_plus_window() {
    let sw = SlidingWindow::new(2, 10 * S).unwrap();
    let mut log = Log::new();
    assert_eq!(call(&sw, &mut log, T0, 1), [0, 2, 1, -1, 10]);
    assert_eq!(call(&sw, &mut log, T0 + 4 * S, 1), [0, 2, 0, -1, 10]);
    assert_eq!(call(&sw, &mut log, T0 + 5 * S, 1), [1, 2, 0, 5, 9]);
    // 1 ns left: under a millisecond, so reported as 0 s.
    assert_eq!(call(&sw, &mut log, T0 + 10 * S - 1, 1), [1, 2, 0, 0, 4]);
    assert_eq!(call(&sw, &mut log, T0 + 10 * S, 1), [0, 2, 0, -1, 10]);
    assert_eq!(log.len(), 2, "the first entry was dropped");
}

#[test]
fn weighted_requests_are_one_entry_and_retry_waits_for_enough_to_leave() {
    let sw = SlidingWindow::new(10, 60 * S).unwrap();
    let mut log = Log::new();
    assert_eq!(call(&sw, &mut log, T0, 4), [0, 10, 6, -1, 60]);
    assert_eq!(call(&sw, &mut log, T0 + 10 * S, 3), [0, 10, 3, -1, 60]);
    assert_eq!(call(&sw, &mut log, T0 + 20 * S, 3), [0, 10, 0, -1, 60]);
    assert_eq!(log.len(), 3);
    // 5 more need the first two entries (4 + 3) gone: at T0 + 70 s.
    assert_eq!(call(&sw, &mut log, T0 + 30 * S, 5), [1, 10, 0, 40, 50]);
    assert_eq!(call(&sw, &mut log, T0 + 30 * S, 11), [1, 10, 0, -1, 50]);
    assert_eq!(call(&sw, &mut log, T0 + 30 * S, 0), [0, 10, 0, -1, 50]);
    assert_eq!(call(&sw, &mut log, T0 + 70 * S, 5), [0, 10, 2, -1, 60]);
}

#[test]
fn limit_zero_refuses_everything() {
    let sw = SlidingWindow::new(0, S).unwrap();
    let mut log = Log::new();
    assert_eq!(call(&sw, &mut log, T0, 1), [1, 0, 0, -1, 0]);
    assert_eq!(call(&sw, &mut log, T0, 0), [1, 0, 0, -1, 0]);
    assert!(log.is_empty());
}

#[test]
fn peek_on_an_empty_key() {
    let sw = SlidingWindow::new(5, S).unwrap();
    assert_eq!(call(&sw, &mut Log::new(), T0, 0), [0, 5, 5, -1, 0]);
}

#[test]
fn encoding_round_trips_and_is_canonical() {
    let sw = SlidingWindow::new(1000, 10 * S).unwrap();
    let mut log = Log::new();
    for i in 0..500 {
        call(&sw, &mut log, T0 + i * 37 * 1_000_000, 1 + i % 3);
    }
    let bytes = log.encode();
    let back = Log::decode(&bytes).unwrap();
    assert_eq!(
        back.iter().collect::<Vec<_>>(),
        log.iter().collect::<Vec<_>>()
    );
    assert_eq!(back.encode(), bytes);
    assert_eq!(Log::decode(&Log::new().encode()).unwrap(), Log::new());
}

#[test]
fn decode_rejects_inconsistent_data() {
    let sw = SlidingWindow::new(100, 10 * S).unwrap();
    let mut log = Log::new();
    for i in 0..10 {
        call(&sw, &mut log, T0 + i * S, 2);
    }
    let good = log.encode();
    assert!(Log::decode(&good).is_ok());
    assert_eq!(Log::decode(&[]), Err(LogError::Malformed));
    assert_eq!(
        Log::decode(&good[..good.len() - 1]),
        Err(LogError::Malformed)
    );
    let mut extra = good.clone();
    extra.push(0);
    assert_eq!(Log::decode(&extra), Err(LogError::Malformed));
    let mut version = good.clone();
    version[0] = 9;
    assert_eq!(Log::decode(&version), Err(LogError::Malformed));
}

#[test]
fn a_full_log_at_the_largest_limit() {
    let sw = SlidingWindow::new(i64::MAX, 10 * S).unwrap();
    let mut log = Log::new();
    assert_eq!(call(&sw, &mut log, T0, i64::MAX)[..3], [0, i64::MAX, 0]);
    assert_eq!(call(&sw, &mut log, T0 + S, 1), [1, i64::MAX, 0, 9, 9]);
}

#[test]
fn a_refused_record_leaves_the_log_unchanged() {
    let mut log = Log::new();
    record(&mut log, 10 * S, T0, 3).unwrap();
    record(&mut log, 10 * S, T0 + 20 * S, i64::MAX - 10).unwrap();
    let before = log.clone();
    // Older than the newest entry: refused before anything is purged.
    assert_eq!(
        record(&mut log, 10 * S, T0 + 19 * S, 1),
        Err(LogError::BadEntry)
    );
    // The total would overflow even after the first entry leaves.
    assert_eq!(
        record(&mut log, 10 * S, T0 + 25 * S, 11),
        Err(LogError::Overflow)
    );
    assert_eq!(record(&mut log, S, T0 + 25 * S, 0), Err(LogError::BadEntry));
    assert_eq!(log, before);
    record(&mut log, 10 * S, T0 + 25 * S, 10).unwrap();
    assert_eq!(log.len(), 2, "the first entry left the window");
}

/// Bytes per recorded request with requests spread evenly over the window.
fn bytes_per_request(limit: i64) -> f64 {
    let window = 60 * S;
    let sw = SlidingWindow::new(limit, window).unwrap();
    let mut log = Log::new();
    let step = window / limit;
    // Two full windows, so that the log is in its steady state.
    for i in 0..2 * limit {
        call(&sw, &mut log, T0 + i * step, 1);
    }
    assert_eq!(log.total(), limit);
    (log.heap_bytes() + std::mem::size_of::<Log>()) as f64 / limit as f64
}

#[test]
fn at_most_8_bytes_per_recorded_request() {
    for limit in [1_000, 100_000] {
        let b = bytes_per_request(limit);
        assert!(b <= 8.0, "limit {limit}: {b:.2} bytes per request");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// In every window-long interval the admitted quantity is at most the
    /// limit; a refused request retried at `retry_after` fits and not a
    /// nanosecond earlier; refused requests and peeks change nothing.
    #[test]
    fn exact_and_refusals_change_nothing(
        limit in 0i64..12,
        window_ms in 1i64..5_000,
        calls in prop::collection::vec((0i64..1_500_000_000, 0i64..5), 1..120),
    ) {
        let window = window_ms * NANOS_PER_MILLI;
        let sw = SlidingWindow::new(limit, window).unwrap();
        let mut log = Log::new();
        let mut now = T0;
        let mut admitted: Vec<(i64, i64)> = Vec::new();
        for (dt, q) in calls {
            now += dt;
            let before = log.clone();
            let (decision, verdict) = sw.decide(&log, now, q);
            prop_assert!((0..=limit).contains(&verdict.remaining));
            match decision {
                Decision::Allowed { record_at: Some(at) } => {
                    record(&mut log, sw.window(), at, q).unwrap();
                    admitted.push((at, q));
                }
                Decision::Allowed { record_at: None } => prop_assert_eq!(q, 0),
                Decision::Limited { retry_after } => {
                    let (later, _) = sw.decide(&log, now + retry_after, q);
                    let fits = matches!(later, Decision::Allowed { .. });
                    prop_assert!(fits);
                    let (earlier, _) = sw.decide(&log, now + retry_after - 1, q);
                    let fits_early = matches!(earlier, Decision::Allowed { .. });
                    prop_assert!(!fits_early);
                }
                Decision::NeverFits => prop_assert!(limit == 0 || q > limit),
            }
            if !matches!(decision, Decision::Allowed { record_at: Some(_) }) {
                prop_assert_eq!(&log, &before);
            }
        }
        for &(t, _) in &admitted {
            let in_window: i64 = admitted
                .iter()
                .filter(|&&(u, _)| u > t - window && u <= t)
                .map(|&(_, q)| q)
                .sum();
            prop_assert!(in_window <= limit, "{} admitted in the window ending at {}", in_window, t);
        }
    }

    /// No 64-bit input makes a decision or a record panic or overflow.
    #[test]
    fn never_panics(
        limit in any::<i64>(), window in any::<i64>(), now in any::<i64>(), q in any::<i64>(),
        entries in prop::collection::vec((0i64..=i64::MAX, 1i64..=i64::MAX), 0..4),
    ) {
        let mut log = Log::new();
        for (ts, eq) in entries {
            let _ = record(&mut log, window.max(1), ts, eq);
        }
        if let Ok(sw) = SlidingWindow::new(limit, window) {
            let (decision, verdict) = sw.decide(&log, now, q);
            prop_assert!(verdict.remaining >= 0 && verdict.remaining <= limit);
            let _ = verdict.to_reply();
            if let Decision::Allowed { record_at: Some(at) } = decision {
                let _ = record(&mut log, window, at, q);
            }
        }
    }

    /// Arbitrary bytes never make decoding panic, and what decodes is a
    /// consistent log that encodes back to the same bytes.
    #[test]
    fn decode_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        if let Ok(log) = Log::decode(&bytes) {
            prop_assert_eq!(log.iter().map(|(_, q)| q).sum::<i64>(), log.total());
            prop_assert_eq!(log.iter().count() as u64, log.len());
        }
    }

    #[test]
    fn round_trip(entries in prop::collection::vec((0i64..10_000_000_000, 1i64..1000), 0..200)) {
        let mut log = Log::new();
        let mut ts = 0;
        for (dt, q) in entries {
            ts += dt;
            log.push(ts, q).unwrap();
        }
        let back = Log::decode(&log.encode()).unwrap();
        prop_assert_eq!(back.iter().collect::<Vec<_>>(), log.iter().collect::<Vec<_>>());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// `allow` answers and records exactly as `decide` then `record` do,
    /// and leaves the log unchanged whenever it only decides: on random
    /// calls with the clock stepping back, quantities of 0 and above the
    /// limit, limits changing from call to call, refunds, and instants at
    /// the end of 64-bit nanoseconds.
    #[test]
    fn allow_is_decide_then_record(
        window_ms in 1i64..3_000,
        start in prop_oneof![Just(T0), Just(i64::MAX - 4_000_000_000), Just(0i64)],
        calls in prop::collection::vec(
            (-200_000_000i64..900_000_000, 0i64..4, 0i64..8, 0u8..8),
            1..150,
        ),
    ) {
        let window = window_ms * NANOS_PER_MILLI;
        let mut by_allow = Log::new();
        let mut by_decide = Log::new();
        let mut now = start;
        for (dt, q, limit, refund) in calls {
            now = now.saturating_add(dt).max(0);
            let sw = SlidingWindow::new(limit, window).unwrap();
            if sw.check(now).is_err() {
                continue;
            }
            if refund == 0 {
                unrecord(&mut by_allow, window, now, 1).unwrap();
                unrecord(&mut by_decide, window, now, 1).unwrap();
            }
            let before = by_allow.clone();
            let (decision, verdict) = sw.decide(&by_decide, now, q);
            let recorded = match decision {
                Decision::Allowed { record_at: Some(at) } => {
                    record(&mut by_decide, window, at, q).ok().map(|()| at)
                }
                _ => None,
            };
            match sw.allow(&mut by_allow, now, q) {
                Allow::Recorded { verdict: v, at } => {
                    prop_assert_eq!(v, verdict);
                    prop_assert_eq!(Some(at), recorded);
                }
                Allow::Decided(d, v) => {
                    prop_assert_eq!((d, v), (decision, verdict));
                    prop_assert_eq!(&by_allow, &before);
                    if let Decision::Allowed { record_at: Some(at) } = d {
                        let _ = record(&mut by_allow, window, at, q);
                    }
                }
            }
            prop_assert_eq!(&by_allow, &by_decide);
            prop_assert_eq!(by_allow.encode(), by_decide.encode());
            prop_assert_eq!(by_allow.heap_bytes(), by_decide.heap_bytes());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    /// Logs of many chunks: every decision equals the one a flat walk of the
    /// admitted requests gives, and the log holds exactly the requests of
    /// the current window once purged.
    #[test]
    fn many_chunks_decide_as_a_flat_log(
        limit in 5_000i64..20_000,
        seed in any::<u64>(),
    ) {
        let window = 10 * S;
        let sw = SlidingWindow::new(limit, window).unwrap();
        let mut log = Log::new();
        // The oracle: the admitted requests still in the window, and their sum.
        let mut admitted = std::collections::VecDeque::<(i64, i64)>::new();
        let mut in_window = 0i64;
        let mut now = T0;
        let mut x = seed | 1;
        for _ in 0..40_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            now += (x % 1_000_000) as i64;
            let q = (x >> 32) as i64 % 4;
            while admitted.front().is_some_and(|e| e.0 <= now - window) {
                in_window -= admitted.pop_front().unwrap().1;
            }
            let (decision, verdict) = sw.decide(&log, now, q);
            let fits = q <= limit && in_window + q <= limit;
            prop_assert_eq!(!verdict.limited, fits);
            if let Decision::Allowed { record_at: Some(at) } = decision {
                record(&mut log, window, at, q).unwrap();
                admitted.push_back((at, q));
                in_window += q;
            }
            if let Decision::Limited { retry_after } = decision {
                let (later, _) = sw.decide(&log, now + retry_after, q);
                let fits_then = matches!(later, Decision::Allowed { .. });
                prop_assert!(fits_then);
                let (earlier, _) = sw.decide(&log, now + retry_after - 1, q);
                let fits_before = matches!(earlier, Decision::Allowed { .. });
                prop_assert!(!fits_before);
            }
        }
        let live: Vec<(i64, i64)> = admitted.into_iter().collect();
        log.purge(now - window);
        prop_assert_eq!(log.iter().collect::<Vec<_>>(), live);
        prop_assert_eq!(Log::decode(&log.encode()).unwrap(), log);
    }
}

proptest! {
    /// A refund of what was just admitted restores the previous log (less
    /// what left the window meanwhile, which no decision can see).
    #[test]
    fn refund_undoes_an_admission(
        entries in prop::collection::vec((0i64..2_000_000_000, 1i64..5), 0..60),
        q in 1i64..6,
        dt in 0i64..3_000_000_000,
    ) {
        let window = 5 * S;
        let mut log = Log::new();
        let mut ts = T0;
        for (step, eq) in entries {
            ts += step;
            record(&mut log, window, ts, eq).unwrap();
        }
        let now = ts + dt;
        let mut expected = log.clone();
        expected.purge(now - window);
        let sw = SlidingWindow::new(1_000, window).unwrap();
        if let (Decision::Allowed { record_at: Some(at) }, _) = sw.decide(&log, now, q) {
            record(&mut log, window, at, q).unwrap();
            cell_core::sliding::unrecord(&mut log, window, at, q).unwrap();
            prop_assert_eq!(log, expected);
        }
    }
}
