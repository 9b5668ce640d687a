//! SW.ALLOW APPROX against the exact log on the same request streams:
//! how many requests each admits, and the most the approximation lets into
//! any one sliding window. Run: `cargo run -p cell-core --example approx_vs_exact`.

use cell_core::sliding::{self, Log, SlidingWindow};
use cell_core::sliding_approx::{ApproxWindow, Counter, Decision};

const SEC: i64 = 1_000_000_000;
const LIMIT: i64 = 100;
const WINDOW: i64 = 60 * SEC;
const T0: i64 = 1_700_000_040 * SEC; // a multiple of the window

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Request times for ten windows.
fn streams() -> Vec<(&'static str, Vec<i64>)> {
    let mut rng = Rng(7);
    let span = 10 * WINDOW;
    let steady = |per_window: i64| {
        (0..10 * per_window)
            .map(|i| T0 + i * WINDOW / per_window)
            .collect()
    };
    let mut random: Vec<i64> = (0..2_000)
        .map(|_| T0 + (rng.next() % span as u64) as i64)
        .collect();
    random.sort_unstable();
    // The approximation's worst case: a burst in the very last millisecond
    // of one window, then one late in the next, just before the first
    // burst leaves the sliding window.
    let ms = SEC / 1000;
    let edges = (0..10)
        .flat_map(|w| {
            let end = T0 + (w + 1) * WINDOW;
            let (from, span) = if w % 2 == 0 {
                (end - ms, ms)
            } else {
                (end - SEC, SEC - 2 * ms)
            };
            (0..300).map(move |i| from + i * span / 300)
        })
        .collect();
    vec![
        ("steady, 1.5x the limit", steady(150)),
        ("steady, 3x the limit", steady(300)),
        ("random, 2x the limit", random),
        ("worst case: bursts at window ends", edges),
    ]
}

fn max_in_any_window(admitted: &[i64]) -> usize {
    let mut best = 0;
    let mut start = 0;
    for (end, &t) in admitted.iter().enumerate() {
        while admitted[start] <= t - WINDOW {
            start += 1;
        }
        best = best.max(end - start + 1);
    }
    best
}

fn main() {
    println!("| stream (limit {LIMIT} per 60 s) | exact admitted | APPROX admitted | difference | APPROX max in one window |");
    println!("|---|---:|---:|---:|---:|");
    for (name, times) in streams() {
        let sw = SlidingWindow::new(LIMIT, WINDOW).unwrap();
        let approx = ApproxWindow::new(LIMIT, WINDOW).unwrap();
        let (mut log, mut counter): (Log, Option<Counter>) = (Log::new(), None);
        let (mut exact, mut approximate) = (Vec::new(), Vec::new());
        for &t in &times {
            if let (
                sliding::Decision::Allowed {
                    record_at: Some(at),
                },
                _,
            ) = sw.decide(&log, t, 1)
            {
                sliding::record(&mut log, WINDOW, at, 1).unwrap();
                exact.push(t);
            }
            if let (Decision::Allowed { counter: Some(c) }, _) = approx.decide(counter, t, 1) {
                counter = Some(c);
                approximate.push(t);
            }
        }
        let diff = (approximate.len() as f64 - exact.len() as f64) / exact.len() as f64 * 100.0;
        println!(
            "| {name} | {} | {} | {diff:+.1}% | {} |",
            exact.len(),
            approximate.len(),
            max_in_any_window(&approximate)
        );
    }
}
