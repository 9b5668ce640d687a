//! A small leveled logger with the reference's `LOG_LEVEL` and
//! `LOG_FORMAT` (`text` or `json`), to stderr.

use std::io::Write;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

static LEVEL: AtomicU8 = AtomicU8::new(2);
static JSON: AtomicU8 = AtomicU8::new(0);

const NAMES: [&str; 5] = ["debug", "info", "warning", "error", "fatal"];

pub fn init(level: &str, format: &str) {
    let l = match level {
        "DEBUG" | "TRACE" => 0,
        "INFO" => 1,
        "WARN" | "WARNING" => 2,
        "ERROR" => 3,
        _ => 2,
    };
    LEVEL.store(l, Ordering::Relaxed);
    JSON.store(u8::from(format == "json"), Ordering::Relaxed);
}

fn emit(level: u8, msg: &str) {
    if level < LEVEL.load(Ordering::Relaxed) {
        return;
    }
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    let name = NAMES[usize::from(level).min(4)];
    let line = if JSON.load(Ordering::Relaxed) == 1 {
        serde_json::json!({"@timestamp": t, "level": name, "@message": msg}).to_string()
    } else {
        format!("time={t:.3} level={name} msg={msg:?}")
    };
    // eprintln! panics when stderr fails (a pipe whose reader went away):
    // a line that cannot be written is dropped, whatever thread logs it.
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

pub fn debug(msg: &str) {
    emit(0, msg)
}
pub fn info(msg: &str) {
    emit(1, msg)
}
pub fn warn(msg: &str) {
    emit(2, msg)
}
pub fn error(msg: &str) {
    emit(3, msg)
}
