//! Every decision on arbitrary 64-bit inputs: no panic, no overflow, and
//! `remaining` within `[0, limit]`.
#![no_main]
use cell_core::calendar::{self, Unit};
use cell_core::{fixed, gcra, lease, sliding, sliding_approx, zoned};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

/// Zones with changes of every kind: DST, at midnight, back across
/// midnight, a skipped day, 30 minutes.
static ZONES: OnceLock<Vec<zoned::TimeZone>> = OnceLock::new();

fuzz_target!(|input: [i64; 6]| {
    let [a, b, c, now, q, stored] = input;
    if let Ok(g) = gcra::Gcra::new(a, b, c) {
        if let Ok((_, v)) = g.decide(Some(stored), now, q) {
            assert!((0..=g.limit()).contains(&v.remaining));
        }
    }
    if let Ok(f) = fixed::FixedWindow::new(a, b, c & 1 == 1) {
        let found = fixed::Counter { count: stored, expire_at_ms: Some(c) };
        let v = f.decide(Some(found), now, q).verdict;
        assert!(v.remaining >= 0 && v.remaining <= a);
    }
    if let Ok(w) = sliding_approx::ApproxWindow::new(a, b) {
        let state = sliding_approx::Counter { window: b, index: c, previous: stored.max(0), current: q.max(0) };
        let (_, v) = w.decide(Some(state), now, q);
        assert!(v.remaining >= 0 && v.remaining <= a);
    }
    if let Ok(g) = gcra::Gcra::new(a, b, c) {
        let _ = g.reserve(Some(stored), now, q, c);
        let _ = g.refund(stored, now, q);
    }
    for unit in [Unit::Minute, Unit::Hour, Unit::Day, Unit::Week, Unit::Month, Unit::Year] {
        let offset = (a % (14 * 3600)).abs();
        assert!(calendar::period_end(now, unit, offset) > i128::from(now));
        if let Ok(f) = fixed::FixedWindow::calendar(b, unit, -offset) {
            let found = fixed::Counter { count: stored, expire_at_ms: None };
            let _ = f.decide(Some(found), now, q).verdict.to_reply();
        }
    }
    let zones = ZONES.get_or_init(|| {
        ["Europe/Berlin", "America/Santiago", "America/Goose_Bay", "Pacific/Apia", "Australia/Lord_Howe"]
            .iter()
            .filter_map(|n| zoned::find(n.as_bytes()))
            .collect()
    });
    if let Some(zone) = zones.get(c.rem_euclid(5) as usize) {
        for unit in [Unit::Minute, Unit::Hour, Unit::Day, Unit::Week, Unit::Month, Unit::Year] {
            assert!(zoned::period_end(now, unit, zone) > i128::from(now));
            if let Ok(f) = fixed::FixedWindow::zoned(b, unit, zone.clone()) {
                let found = fixed::Counter { count: stored, expire_at_ms: None };
                let _ = f.decide(Some(found), now, q).verdict.to_reply();
            }
        }
    }
    let mut leases = lease::Leases::new();
    leases.hold(&a.to_le_bytes(), stored, now);
    if let Ok((_, v)) = leases.acquire(b, now, c, Some(&q.to_le_bytes())) {
        let _ = v.to_reply();
    }
    if let Ok(w) = sliding::SlidingWindow::new(a, b) {
        let mut log = sliding::Log::new();
        let _ = log.push(stored, c.max(1));
        let (_, v) = w.decide(&log, now, q);
        assert!(v.remaining >= 0 && v.remaining <= a);
    }
});
