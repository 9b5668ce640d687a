//! Calendar windows (FW.INCR ... month TZ +09:00) against Python's own
//! calendar: the key must expire at the end of the calendar period
//! containing the instant, in the given offset; and in named zones with
//! daylight saving time (TZ Europe/Berlin).

use crate::support::*;
use std::io::Write;
use std::process::{Command, Stdio};

const BAD_TZ: &str = "ERR invalid TZ: expected a time zone name such as Europe/Berlin, or an offset from -12:00 to +14:00 such as +09:00";

/// The end of the period, in Unix ms, for each `(ns, unit, offset minutes)`,
/// computed by Python's datetime.
fn python_ends(cases: &[(i64, &str, i64)]) -> Vec<i64> {
    let script = r#"
import sys
from datetime import datetime, timezone, timedelta
for line in sys.stdin:
    ns, unit, off = line.split()
    t = datetime.fromtimestamp(int(ns) // 10**9, timezone(timedelta(minutes=int(off))))
    day = t.replace(hour=0, minute=0, second=0, microsecond=0)
    if unit == "minute":
        end = t.replace(second=0, microsecond=0) + timedelta(minutes=1)
    elif unit == "hour":
        end = t.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    elif unit == "day":
        end = day + timedelta(days=1)
    elif unit == "week":
        end = day - timedelta(days=t.weekday()) + timedelta(days=7)
    elif unit == "month":
        end = (day.replace(day=1) + timedelta(days=32)).replace(day=1)
    else:
        end = day.replace(year=t.year + 1, month=1, day=1)
    print(int(end.timestamp()) * 1000)
"#;
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 is needed for the calendar oracle");
    let input: String = cases
        .iter()
        .map(|(ns, unit, off)| format!("{ns} {unit} {off}\n"))
        .collect();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect()
}

fn offset_text(minutes: i64) -> String {
    let sign = if minutes < 0 { '-' } else { '+' };
    format!("{sign}{:02}:{:02}", minutes.abs() / 60, minutes.abs() % 60)
}

/// Unix seconds of a UTC civil time.
fn utc(y: i64, mo: i64, d: i64, h: i64, mi: i64, s: i64) -> i64 {
    let y2 = if mo <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let doy = (153 * ((mo + 9) % 12) + 2) / 5 + d - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    days * 86_400 + h * 3_600 + mi * 60 + s
}

#[test]
fn calendar_windows_end_where_the_calendar_says() {
    let s = Server::start();
    let c = &mut s.conn();
    let units = ["minute", "hour", "day", "week", "month", "year"];
    let offsets = [-720, -570, -210, 0, 60, 330, 345, 540, 765, 840];
    let mut instants: Vec<i64> = Vec::new();
    // Boundaries: the last nanosecond before and the first one of a new
    // period, around leap days, year ends and Mondays.
    for (y, mo, d) in [
        (2024, 2, 29),
        (2024, 3, 1),
        (2023, 3, 1),
        (2100, 3, 1),
        (2000, 3, 1),
        (2026, 1, 1),
        (2026, 11, 30),
        (2026, 11, 29),
    ] {
        let midnight = utc(y, mo, d, 0, 0, 0) * SEC;
        for off in offsets {
            let local_midnight = midnight - off * 60 * SEC;
            instants.extend([local_midnight - 1, local_midnight, local_midnight + SEC]);
        }
    }
    // And instants spread over three centuries.
    let mut x = 0xDEAD_BEEF_u64;
    for _ in 0..60 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        instants
            .push(utc(1971, 1, 1, 0, 0, 0) * SEC + (x >> 3) as i64 % (280 * 365 * 86_400 * SEC));
    }
    let mut cases = Vec::new();
    for (i, &ns) in instants.iter().enumerate() {
        let unit = units[i % units.len()];
        for (j, &off) in offsets.iter().enumerate() {
            if (i + j) % 3 == 0 {
                cases.push((ns, unit, off));
            }
        }
    }
    let expected = python_ends(&cases);
    assert_eq!(expected.len(), cases.len());
    for (k, ((ns, unit, off), want)) in cases.iter().zip(expected).enumerate() {
        s.set_time(*ns);
        let key = format!("q{k}");
        let tz = offset_text(*off);
        let reply = five(c, &format!("FW.INCR {key} 10 {unit} TZ {tz}"));
        assert_eq!(reply[..3], [0, 10, 9], "{unit} {tz} at {ns}");
        assert_eq!(
            expire_time_ms(c, &key),
            want,
            "FW.INCR {key} 10 {unit} TZ {tz} at {ns} ns"
        );
        // A UTC offset of zero is the default.
        if *off == 0 {
            let utc_key = format!("u{k}");
            five(c, &format!("FW.INCR {utc_key} 10 {unit}"));
            assert_eq!(expire_time_ms(c, &utc_key), want);
        }
    }
}

#[test]
fn a_monthly_quota_in_tokyo() {
    let s = Server::start();
    let c = &mut s.conn();
    // 2024-02-29 14:59:59 UTC is 23:59:59 on the 29th in Tokyo: the month
    // ends a second later (a leap year's February).
    let feb29 = utc(2024, 2, 29, 14, 59, 59) * SEC;
    s.set_time(feb29);
    let line = "FW.INCR quota:{acme} 2 month TZ +09:00";
    assert_eq!(five(c, line), [0, 2, 1, -1, 1]);
    assert_eq!(five(c, &format!("{line} MS")), [0, 2, 0, -1, 1_000]);
    assert_eq!(five(c, line), [1, 2, 0, 1, 1]);
    s.set_time(feb29 + SEC);
    // March in Tokyo: 31 days.
    assert_eq!(five(c, line), [0, 2, 1, -1, 31 * 86_400]);
    // Peeks and refunds take the same words; so does CL.THROTTLEALL.
    assert_eq!(
        five(c, "FW.PEEK quota:{acme} 2 month TZ +09:00"),
        [0, 2, 1, -1, 31 * 86_400]
    );
    assert_eq!(
        five(c, "FW.REFUND quota:{acme} 2 month 1 TZ +09:00"),
        [0, 2, 2, -1, 0]
    );
    let v: Vec<i64> = redis::cmd("CL.THROTTLEALL")
        .arg(&[
            "2", "{acme}:s", "{acme}:y", "GCRA", "9", "10", "1", "FW", "1000", "year", "TZ",
            "-05:00", "ALIGN",
        ])
        .query(c)
        .unwrap();
    assert_eq!(v, [0, 10, 9, -1, 1, 1]);
    // Until 2025-01-01 05:00 UTC.
    assert_eq!(
        expire_time_ms(c, "{acme}:y"),
        utc(2025, 1, 1, 5, 0, 0) * 1000
    );
    for (line, want) in [
        ("FW.INCR q 1 month TZ +14:01", BAD_TZ),
        ("FW.INCR q 1 month TZ 09:00", BAD_TZ),
        ("FW.INCR q 1 month TZ", "ERR TZ needs a value"),
        (
            "FW.INCR q 1 60 TZ +01:00",
            "ERR TZ needs a calendar window: minute, hour, day, week, month or year",
        ),
        (
            "FW.INCR q 1 fortnight",
            "ERR invalid window: expected seconds or a number with a unit: ms, s, m, h or d",
        ),
        ("CL.THROTTLEALL 1 q FW 1 month TZ +25:00", BAD_TZ),
    ] {
        assert_eq!(err(c, line), want, "{line}");
    }
    assert_eq!(cmd(c, "EXISTS q").unwrap(), Value::Int(0));
}

/// The days around Berlin's changes of clock in 2026: each key expires at
/// the exact local midnight, whether the day lasts 24, 23 or 25 hours.
#[test]
fn a_daily_quota_in_berlin_across_the_clock_changes() {
    let s = Server::start();
    let c = &mut s.conn();
    let h = 3_600;
    // (now, the next local midnight), in Unix seconds.
    let cases = [
        // Saturday 28 March, 13:00 CET: midnight CET is 23:00 UTC.
        (utc(2026, 3, 28, 12, 0, 0), utc(2026, 3, 28, 23, 0, 0)),
        // Sunday 29 March lasts 23 hours: from 00:00 CET to 00:00 CEST.
        (utc(2026, 3, 28, 23, 0, 0), utc(2026, 3, 29, 22, 0, 0)),
        // 01:59:59 CET, the last second before the jump, and 03:00 CEST.
        (utc(2026, 3, 29, 0, 59, 59), utc(2026, 3, 29, 22, 0, 0)),
        (utc(2026, 3, 29, 1, 0, 0), utc(2026, 3, 29, 22, 0, 0)),
        // Sunday 25 October lasts 25 hours: from 00:00 CEST to 00:00 CET,
        // through 02:30 twice (CEST, then CET).
        (utc(2026, 10, 24, 22, 0, 0), utc(2026, 10, 25, 23, 0, 0)),
        (utc(2026, 10, 25, 0, 30, 0), utc(2026, 10, 25, 23, 0, 0)),
        (utc(2026, 10, 25, 1, 30, 0), utc(2026, 10, 25, 23, 0, 0)),
        (utc(2026, 10, 25, 22, 59, 59), utc(2026, 10, 25, 23, 0, 0)),
    ];
    for (i, (now, midnight)) in cases.into_iter().enumerate() {
        s.set_time(now * SEC);
        let key = format!("day{i}");
        let reply = five(c, &format!("FW.INCR {key} 10 day TZ Europe/Berlin"));
        assert_eq!(reply, [0, 10, 9, -1, midnight - now], "case {i}");
        assert_eq!(expire_time_ms(c, &key), midnight * 1000, "case {i}");
    }
    assert_eq!(cases[1].1 - cases[1].0, 23 * h);
    assert_eq!(cases[4].1 - cases[4].0, 25 * h);

    // A quota used up late on Saturday opens again at local midnight, for
    // the 23 hours of Sunday; names are matched in any case.
    let line = "FW.INCR quota 2 day TZ europe/berlin";
    s.set_time((utc(2026, 3, 28, 23, 0, 0) - 1) * SEC);
    assert_eq!(five(c, line)[..3], [0, 2, 1]);
    assert_eq!(five(c, line)[..3], [0, 2, 0]);
    assert_eq!(five(c, line), [1, 2, 0, 1, 1]);
    s.set_time(utc(2026, 3, 28, 23, 0, 0) * SEC);
    assert_eq!(five(c, line), [0, 2, 1, -1, 23 * h]);
    assert_eq!(
        five(c, "FW.PEEK quota 2 day TZ Europe/Berlin MS"),
        [0, 2, 1, -1, 23 * h * 1000]
    );
    assert_eq!(
        five(c, "FW.REFUND quota 2 day 1 TZ Europe/Berlin"),
        [0, 2, 2, -1, 0]
    );

    // An hour is a real hour: 02:00-03:00 CEST and 02:00-03:00 CET are two
    // windows, the hours of UTC.
    for (i, hour) in [0, 1].into_iter().enumerate() {
        s.set_time(utc(2026, 10, 25, hour, 30, 0) * SEC);
        let key = format!("hour{i}");
        assert_eq!(
            five(c, &format!("FW.INCR {key} 10 hour TZ Europe/Berlin")),
            [0, 10, 9, -1, 1_800]
        );
        assert_eq!(
            expire_time_ms(c, &key),
            utc(2026, 10, 25, hour + 1, 0, 0) * 1000
        );
    }

    // CL.THROTTLEALL takes the same words: a week in New York ends at
    // Monday 00:00 EST, 2026-11-02 05:00 UTC, the day after its change.
    s.set_time(utc(2026, 10, 31, 12, 0, 0) * SEC);
    let v: Vec<i64> = redis::cmd("CL.THROTTLEALL")
        .arg(&["1", "{ny}:w", "FW", "100", "week", "TZ", "America/New_York"])
        .query(c)
        .unwrap();
    assert_eq!(v[..4], [0, 100, 99, -1]);
    assert_eq!(
        expire_time_ms(c, "{ny}:w"),
        utc(2026, 11, 2, 5, 0, 0) * 1000
    );

    let long = format!("FW.INCR q 1 day TZ {}", "A".repeat(1000));
    for line in [
        "FW.INCR q 1 day TZ Mars/Base",
        "FW.INCR q 1 day TZ localtime",
        "FW.INCR q 1 day TZ Europe/",
        "FW.INCR q 1 day TZ ../../../etc/passwd",
        "FW.PEEK q 1 day TZ Europe/Berlinn",
        "CL.THROTTLEALL 1 q FW 1 day TZ Mars/Base",
        &long,
    ] {
        assert_eq!(err(c, line), BAD_TZ, "{line}");
    }
    assert_eq!(
        err(c, "FW.INCR q 1 60 TZ Europe/Berlin"),
        "ERR TZ needs a calendar window: minute, hour, day, week, month or year"
    );
    assert_eq!(cmd(c, "EXISTS q").unwrap(), Value::Int(0));
}
