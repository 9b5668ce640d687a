//! The exact log without Redis: ten million requests recorded one by one
//! (a request every 5 µs in a 10-minute window), timing every record. The
//! worst single record shows what growth costs the log itself, apart from
//! the server and the machine.
//!
//!     cargo run --release -p cell-core --example log_growth

use cell_core::sliding::{record, Log};
use std::time::Instant;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000_000);
    let window = 600_000_000_000i64;
    let mut t = 1_700_000_000_000_000_000i64;
    let mut log = Log::new();
    let mut times: Vec<u32> = Vec::with_capacity(n);
    let start = Instant::now();
    for i in 0..n {
        t += 5_000 + (i % 7) as i64;
        let s = Instant::now();
        record(&mut log, window, t, 1).expect("a valid record");
        times.push(s.elapsed().as_nanos().min(u128::from(u32::MAX)) as u32);
    }
    let total = start.elapsed();
    times.sort_unstable();
    let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize];
    println!(
        "| {n} records | {:.2} s | {} ns | {} ns | {} ns | {} µs | {} chunks, {:.2} bytes per request |",
        total.as_secs_f64(),
        at(0.5),
        at(0.99),
        at(0.99999),
        times[times.len() - 1] / 1000,
        log.chunk_count(),
        log.heap_bytes() as f64 / n as f64
    );
}
