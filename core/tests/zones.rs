//! Calendar periods in named time zones against Python's zoneinfo (the
//! oracle in zones_oracle.py, run over the same system database), plus the
//! lookup of names and its cache.

use cell_core::calendar::Unit;
use cell_core::zoned::{self, TimeZone, Zones};
use cell_core::NANOS_PER_SEC;
use jiff::tz::TimeZoneDatabase;
use proptest::prelude::*;
use std::process::Command;

const S: i64 = NANOS_PER_SEC;

/// Daylight saving time of every kind: Europe and North America, a
/// 30-minute change (Lord_Howe), changes at midnight (Santiago, Beirut,
/// Havana), back across midnight (Goose_Bay until 2010), a skipped day
/// (Apia, 2011-12-30) and a repeated one (Apia, 1892-07-04), negative DST
/// (Dublin), four changes a year (Casablanca), two hours (Troll), none
/// (Kolkata, UTC).
const ZONES: &[&str] = &[
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",
    "America/Santiago",
    "Asia/Kolkata",
    "Pacific/Apia",
    "UTC",
    "America/Goose_Bay",
    "Asia/Beirut",
    "America/Havana",
    "Europe/Dublin",
    "Africa/Casablanca",
    "Antarctica/Troll",
];

fn unit(word: &str) -> Unit {
    Unit::parse(word.as_bytes()).expect("a unit")
}

fn zone(name: &str) -> TimeZone {
    zoned::find(name.as_bytes()).unwrap_or_else(|| panic!("{name} is in the database"))
}

#[test]
fn periods_end_where_python_zoneinfo_says() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/zones_oracle.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(ZONES.join(","))
        .output()
        .expect("python3 (with zoneinfo) is needed for the time zone oracle");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let mut zones = std::collections::HashMap::new();
    let (mut cases, mut wrong) = (0usize, Vec::new());
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let [name, word, second, end] = f[..] else {
            panic!("bad oracle line {line:?}");
        };
        let z = zones.entry(name).or_insert_with(|| zone(name));
        let (second, end): (i64, i64) = (second.parse().unwrap(), end.parse().unwrap());
        let want = i128::from(end) * i128::from(S);
        // The first and the last nanosecond of the second.
        for now in [second * S, second * S + (S - 1)] {
            cases += 1;
            let got = zoned::period_end(now, unit(word), z);
            if got != want {
                wrong.push(format!("{name} {word} at {now}: {got}, Python {want}"));
            }
        }
    }
    assert!(cases > 100_000, "only {cases} cases");
    for zone in ZONES {
        assert!(text.contains(&format!("{zone} year ")), "{zone} missing");
    }
    assert!(
        wrong.is_empty(),
        "{} of {cases} differ, first:\n{}",
        wrong.len(),
        wrong[..wrong.len().min(20)].join("\n")
    );
}

/// Unix seconds of a UTC civil time.
fn utc(y: i64, mo: i64, d: i64, h: i64, mi: i64) -> i64 {
    let days = cell_core::calendar::days_from_civil(y, mo, d);
    days * 86_400 + h * 3_600 + mi * 60
}

fn end(name: &str, word: &str, now_secs: i64) -> i128 {
    zoned::period_end(now_secs * S, unit(word), &zone(name)) / i128::from(S)
}

#[test]
fn days_of_23_and_25_hours() {
    // Berlin, 2026-03-29: 00:00 CET is 23:00 UTC the day before, and the
    // next midnight is 00:00 CEST, 22:00 UTC: 23 hours.
    let start = utc(2026, 3, 28, 23, 0);
    assert_eq!(end("Europe/Berlin", "day", start - 1), i128::from(start));
    assert_eq!(
        end("Europe/Berlin", "day", start),
        i128::from(utc(2026, 3, 29, 22, 0))
    );
    // 2026-10-25: from 22:00 UTC to 23:00 UTC the next day, 25 hours.
    let start = utc(2026, 10, 24, 22, 0);
    assert_eq!(
        end("Europe/Berlin", "day", start),
        i128::from(utc(2026, 10, 25, 23, 0))
    );
    // New York, 2026-03-08: 05:00 UTC to 04:00 UTC.
    assert_eq!(
        end("America/New_York", "day", utc(2026, 3, 8, 5, 0)),
        i128::from(utc(2026, 3, 9, 4, 0))
    );
    // A month ends at local midnight: March 2026 in Berlin ends at
    // 2026-04-01 00:00 CEST, 2026-03-31 22:00 UTC.
    assert_eq!(
        end("Europe/Berlin", "month", utc(2026, 3, 15, 12, 0)),
        i128::from(utc(2026, 3, 31, 22, 0))
    );
    // ISO weeks start at local Monday midnight: Monday 2026-03-30 00:00
    // CEST is Sunday 22:00 UTC.
    assert_eq!(
        end("Europe/Berlin", "week", utc(2026, 3, 29, 21, 59)),
        i128::from(utc(2026, 3, 29, 22, 0))
    );
}

#[test]
fn skipped_midnights_end_at_the_jump() {
    // Santiago, 2024-09-08: at 00:00 -04 the clock jumps to 01:00 -03, so
    // 2024-09-07 ends at that instant (04:00 UTC), 24 hours after it began.
    let jump = utc(2024, 9, 8, 4, 0);
    assert_eq!(
        end("America/Santiago", "day", jump - 3600),
        i128::from(jump)
    );
    assert_eq!(
        end("America/Santiago", "day", jump),
        i128::from(utc(2024, 9, 9, 3, 0))
    );
    // Apia skipped 2011-12-30: Thursday the 29th (-10) ended at 10:00 UTC
    // on the 30th, which was Saturday the 31st, 00:00 (+14), in Apia.
    let jump = utc(2011, 12, 30, 10, 0);
    assert_eq!(end("Pacific/Apia", "day", jump - 1), i128::from(jump));
    assert_eq!(
        end("Pacific/Apia", "day", jump),
        i128::from(utc(2011, 12, 31, 10, 0))
    );
}

#[test]
fn hours_are_never_longer_than_an_hour() {
    // Berlin, 2026-10-25: 02:00-03:00 CEST (00:00-01:00 UTC) and 02:00-03:00
    // CET (01:00-02:00 UTC) are two windows, the hours of UTC.
    for h in 0..3 {
        let t = utc(2026, 10, 25, h, 30);
        assert_eq!(
            end("Europe/Berlin", "hour", t),
            i128::from(utc(2026, 10, 25, h + 1, 0))
        );
    }
    // Lord Howe, 2026-04-05 02:00 (+11) goes back to 01:30 (+10:30), at
    // 15:00 UTC: the hour 01:00-02:00 (+11) ends there, and 01:30-02:00
    // (+10:30) is a window of 30 minutes.
    let change = utc(2026, 4, 4, 15, 0);
    assert_eq!(
        end("Australia/Lord_Howe", "hour", change - 900),
        i128::from(change)
    );
    assert_eq!(
        end("Australia/Lord_Howe", "hour", change),
        i128::from(change + 1800)
    );
}

#[test]
fn names_are_found_in_any_case_and_nothing_else_is() {
    assert_eq!(zone("europe/BERLIN"), zone("Europe/Berlin"));
    assert_eq!(zone("Europe/Berlin").iana_name(), Some("Europe/Berlin"));
    assert!(zoned::find(b"UTC").is_some());
    for bad in [
        &b"Mars/Base"[..],
        b"",
        b"localtime",
        b"posixrules",
        b"Etc/Unknown",
        b"+09:00",
        b"../../etc/passwd",
        b"/usr/share/zoneinfo/UTC",
        b"right/UTC",
        b"Europe/Berlin ",
        b"Europe/Berlin\0",
        b"\xff\xfe",
        b"zone.tab",
        &[b'A'; 65][..],
    ] {
        assert!(
            zoned::find(bad).is_none(),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
}

#[test]
fn the_bundled_copy_serves_names_the_system_lacks() {
    let bundled = TimeZoneDatabase::bundled();
    // No system database at all.
    let none = TimeZoneDatabase::none();
    let berlin = zoned::find_in(&[&none, &bundled], b"Europe/Berlin").expect("bundled");
    // A system database with one zone only.
    let dir = std::env::temp_dir().join(format!("cell-tz-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("Etc")).unwrap();
    std::fs::copy("/usr/share/zoneinfo/Etc/UTC", dir.join("Etc/UTC")).unwrap();
    let partial = TimeZoneDatabase::from_dir(&dir).unwrap();
    assert!(partial.get("Europe/Berlin").is_err());
    let from_partial = zoned::find_in(&[&partial, &bundled], b"Europe/Berlin").expect("bundled");
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(from_partial, berlin);
    // The bundled copy agrees with the system's on a change of offset both
    // have known for years.
    let start = utc(2024, 3, 30, 23, 0) * S;
    assert_eq!(
        zoned::period_end(start, Unit::Day, &berlin),
        zoned::period_end(start, Unit::Day, &zone("Europe/Berlin"))
    );
    assert_eq!(
        zoned::period_end(start, Unit::Day, &berlin),
        i128::from(utc(2024, 3, 31, 22, 0) * S)
    );
}

#[test]
fn the_readme_names_the_bundled_release() {
    let readme = include_str!("../../README.md");
    let version = zoned::bundled_version();
    assert!(
        readme.contains(&format!("tzdata {version}")),
        "README.md must say that the bundled copy is tzdata {version}"
    );
}

#[test]
fn the_cache_is_bounded_and_refreshes() {
    let mut zones = Zones::new();
    let t0 = 1_000u64;
    let mut lookups = 0;
    let mut get = |zones: &mut Zones, word: &[u8], at: u64| {
        zones.get(word, at, |w| {
            lookups += 1;
            zoned::find(w)
        })
    };
    assert_eq!(
        get(&mut zones, b"Europe/Berlin", t0),
        Some(zone("Europe/Berlin"))
    );
    assert_eq!(
        get(&mut zones, b"Europe/Berlin", t0 + 1),
        Some(zone("Europe/Berlin"))
    );
    assert_eq!(get(&mut zones, b"Mars/Base", t0), None);
    assert_eq!(get(&mut zones, b"Mars/Base", t0), None);
    assert_eq!(zones.len(), 1, "unknown names are not cached");
    // Stale after FRESH_FOR: looked up again.
    get(&mut zones, b"Europe/Berlin", t0 + zoned::FRESH_FOR);
    // Never more than CACHE_SIZE entries.
    let names: Vec<String> = jiff::tz::db()
        .available()
        .take(zoned::CACHE_SIZE + 8)
        .map(|n| n.as_str().to_owned())
        .collect();
    assert_eq!(names.len(), zoned::CACHE_SIZE + 8);
    for (i, n) in names.iter().enumerate() {
        let at = t0 + 600 + i as u64;
        assert!(get(&mut zones, n.as_bytes(), at).is_some());
    }
    assert_eq!(zones.len(), zoned::CACHE_SIZE);
    assert_eq!(lookups, 4 + names.len());
}

proptest! {
    /// Any instant, any unit, a zone with changes of every kind: the end is
    /// after now, the period is not much longer than its unit (a day can
    /// last 48 hours where a date repeats, as in Apia in 1892), and the
    /// nanosecond before the end is in the same period.
    #[test]
    fn the_period_contains_now(
        now in any::<i64>(),
        name in prop::sample::select(ZONES.to_vec()),
        word in prop::sample::select(vec!["minute", "hour", "day", "week", "month", "year"]),
    ) {
        let z = zone(name);
        let u = unit(word);
        let end = zoned::period_end(now, u, &z);
        prop_assert!(end > i128::from(now));
        let longest = match u {
            Unit::Minute => 60, Unit::Hour => 3_600, Unit::Day => 2 * 86_400,
            Unit::Week => 8 * 86_400, Unit::Month => 32 * 86_400, Unit::Year => 367 * 86_400,
        };
        prop_assert!(end - i128::from(now) <= i128::from(longest) * i128::from(S));
        if let Ok(last) = i64::try_from(end - 1) {
            prop_assert_eq!(zoned::period_end(last, u, &z), end);
        }
    }
}
