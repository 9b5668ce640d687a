//! Named time zones for calendar windows (`TZ Europe/Berlin`): looked up
//! through a small per-thread cache, so that a call naming a zone costs
//! about what a call with a fixed offset costs.

use cell_core::zoned::{self, TimeZone, Zones};
use std::cell::RefCell;

thread_local! {
    static ZONES: RefCell<Zones> = const { RefCell::new(Zones::new()) };
}

/// Opens the time zone database at load, so that the first call naming a
/// zone does not pay for reading its directory (about 13 ms).
pub fn init() {
    let _ = zoned::find(b"Etc/UTC");
}

thread_local! {
    /// A zone given by its rules (a policy's, as its master read them),
    /// which [`find`] answers for its name instead of this server's own.
    static PINNED: RefCell<Option<(String, TimeZone)>> = const { RefCell::new(None) };
}

/// Runs `f` with `find` answering `zone` for the name `name`.
pub fn with_pinned<R>(name: &str, zone: TimeZone, f: impl FnOnce() -> R) -> R {
    let _ = PINNED.try_with(|p| p.replace(Some((name.to_string(), zone))));
    let out = f();
    let _ = PINNED.try_with(|p| p.replace(None));
    out
}

/// The zone named `word`, or `None` when there is none of that name.
pub fn find(word: &[u8]) -> Option<TimeZone> {
    let pinned = PINNED
        .try_with(|p| {
            p.try_borrow().ok().and_then(|p| {
                p.as_ref()
                    .filter(|(name, _)| name.as_bytes().eq_ignore_ascii_case(word))
                    .map(|(_, zone)| zone.clone())
            })
        })
        .ok()
        .flatten();
    if pinned.is_some() {
        return pinned;
    }
    ZONES
        .try_with(|zones| match zones.try_borrow_mut() {
            Ok(mut zones) => zones.get(word, coarse_seconds(), zoned::find),
            Err(_) => zoned::find(word),
        })
        .unwrap_or_else(|_| zoned::find(word))
}

/// Seconds on the coarse monotonic clock: it ages cache entries, to the
/// second, for a tenth of the cost of a precise reading.
fn coarse_seconds() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid, writable timespec; on failure it stays 0, which only
    // keeps cached zones a little longer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    u64::try_from(ts.tv_sec).unwrap_or(0)
}
