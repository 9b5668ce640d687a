//! The one clock the module reads: the wall clock, in nanoseconds since the
//! Unix epoch. Read once per command so that a command's decision, its stored
//! state and its replicated effect all agree on the instant.

/// Nanoseconds since the Unix epoch from `CLOCK_REALTIME`.
pub fn now_nanos() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the
    // call, and CLOCK_REALTIME is always available on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec
        .saturating_mul(cell_core::NANOS_PER_SEC)
        .saturating_add(ts.tv_nsec)
}
