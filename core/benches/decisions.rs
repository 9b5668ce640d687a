//! Nanoseconds per decision of each limiter, without Redis.

use cell_core::calendar::{self, Unit};
use cell_core::fixed::{Counter as FwCounter, FixedWindow};
use cell_core::gcra::Gcra;
use cell_core::sliding::{self, Log, SlidingWindow};
use cell_core::sliding_approx::ApproxWindow;
use cell_core::zoned::{self, Zones};
use std::hint::black_box;
use std::time::{Duration, Instant};

const NOW: i64 = 1_700_000_000_000_000_000;
const SEC: i64 = 1_000_000_000;

fn decisions(c: &mut Timer) {
    let gcra = Gcra::new(15, 30, 60 * SEC).unwrap();
    c.bench_function("gcra decide", |b| {
        b.iter(|| gcra.decide(black_box(Some(NOW + 10 * SEC)), black_box(NOW), 1))
    });

    for limit in [100i64, 10_000] {
        let sw = SlidingWindow::new(limit, 60 * SEC).unwrap();
        let mut log = Log::new();
        let step = 60 * SEC / limit;
        for i in 0..limit / 2 {
            sliding::record(&mut log, 60 * SEC, NOW - 60 * SEC + i * step * 2, 1).unwrap();
        }
        c.bench_function(&format!("sliding log decide, {} entries", limit / 2), |b| {
            b.iter(|| sw.decide(black_box(&log), black_box(NOW), 1))
        });
        c.bench_function(
            &format!("sliding log decide + record, limit {limit}"),
            |b| {
                let mut log = log.clone();
                let mut now = NOW;
                b.iter(|| {
                    now += step;
                    if let (
                        sliding::Decision::Allowed {
                            record_at: Some(at),
                        },
                        _,
                    ) = sw.decide(&log, now, 1)
                    {
                        sliding::record(&mut log, 60 * SEC, at, 1).unwrap();
                    }
                })
            },
        );
    }

    let approx = ApproxWindow::new(100, 60 * SEC).unwrap();
    let state = cell_core::sliding_approx::record(None, 60 * SEC, NOW, 40);
    c.bench_function("sliding counter (APPROX) decide", |b| {
        b.iter(|| approx.decide(black_box(Some(state)), black_box(NOW + SEC), 1))
    });

    let fw = FixedWindow::new(100, 60 * SEC, false).unwrap();
    let counter = FwCounter {
        count: 40,
        expire_at_ms: Some(NOW / 1_000_000 + 30_000),
    };
    c.bench_function("fixed window decide", |b| {
        b.iter(|| fw.decide(black_box(Some(counter)), black_box(NOW), 1))
    });

    // A calendar window as FW.INCR builds it per call (the TZ word read,
    // the limiter made) and decides on an absent key, which computes where
    // the period ends: a fixed offset against a named zone through the
    // module's cache, and the zone database's own lookup for comparison.
    for unit in [Unit::Hour, Unit::Day, Unit::Month] {
        c.bench_function(&format!("calendar {unit:?} TZ +01:00, new window"), |b| {
            b.iter(|| {
                let offset = calendar::parse_offset(black_box(b"+01:00")).unwrap();
                let fw = FixedWindow::calendar(100, unit, offset).unwrap();
                fw.decide(None, black_box(NOW), 1)
            })
        });
        let mut zones = Zones::new();
        c.bench_function(
            &format!("calendar {unit:?} TZ Europe/Berlin, new window"),
            |b| {
                b.iter(|| {
                    let word = black_box(&b"Europe/Berlin"[..]);
                    let zone = zones.get(word, 1_000, zoned::find).unwrap();
                    let fw = FixedWindow::zoned(100, unit, zone).unwrap();
                    fw.decide(None, black_box(NOW), 1)
                })
            },
        );
    }
    c.bench_function("zone lookup, cached", |b| {
        let mut zones = Zones::new();
        b.iter(|| zones.get(black_box(b"Europe/Berlin"), black_box(1_000), zoned::find))
    });
    c.bench_function("zone lookup, database only", |b| {
        b.iter(|| zoned::find(black_box(b"Europe/Berlin")))
    });
}

/// Times closures as `cargo bench` runs this file (`harness = false`): each
/// benchmark whose name contains the filter (the first argument that is not
/// a flag: `cargo bench -p cell-core --bench decisions -- calendar`) runs
/// in 21 samples of about 20 ms each, and its line gives the median
/// nanoseconds per call with the fastest and slowest samples beside it.
struct Timer {
    filter: Option<String>,
}

struct Bencher {
    per_call: Vec<f64>,
}

impl Timer {
    fn from_args() -> Self {
        let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
        Timer { filter }
    }

    fn bench_function(&mut self, name: &str, f: impl FnOnce(&mut Bencher)) {
        if self
            .filter
            .as_ref()
            .is_some_and(|want| !name.contains(want.as_str()))
        {
            return;
        }
        let mut b = Bencher {
            per_call: Vec::new(),
        };
        f(&mut b);
        b.per_call.sort_by(f64::total_cmp);
        let n = b.per_call.len();
        println!(
            "{name:<50} {:>9.1} ns  ({:.1} .. {:.1})",
            b.per_call[n / 2],
            b.per_call[0],
            b.per_call[n - 1]
        );
    }
}

impl Bencher {
    fn iter<R>(&mut self, mut f: impl FnMut() -> R) {
        // Calls per sample: doubled until a sample takes 20 ms.
        let mut calls = 1u64;
        loop {
            let t = Instant::now();
            for _ in 0..calls {
                black_box(f());
            }
            if t.elapsed() >= Duration::from_millis(20) || calls >= 1 << 40 {
                break;
            }
            calls *= 2;
        }
        for _ in 0..21 {
            let t = Instant::now();
            for _ in 0..calls {
                black_box(f());
            }
            self.per_call
                .push(t.elapsed().as_nanos() as f64 / calls as f64);
        }
    }
}

fn main() {
    decisions(&mut Timer::from_args());
}
