//! Calendar periods (minute, hour, day, ISO week, month, year) at a fixed
//! offset from UTC, in integer arithmetic on the proleptic Gregorian
//! calendar: where the period containing an instant ends.

use crate::NANOS_PER_SEC;

/// A calendar period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Minute,
    Hour,
    Day,
    /// ISO weeks, Monday to Sunday.
    Week,
    Month,
    Year,
}

const DAY: i64 = 86_400;

impl Unit {
    /// `minute`, `hour`, `day`, `week`, `month` or `year`, any case.
    pub fn parse(word: &[u8]) -> Option<Unit> {
        [
            (b"minute" as &[u8], Unit::Minute),
            (b"hour", Unit::Hour),
            (b"day", Unit::Day),
            (b"week", Unit::Week),
            (b"month", Unit::Month),
            (b"year", Unit::Year),
        ]
        .into_iter()
        .find_map(|(name, unit)| word.eq_ignore_ascii_case(name).then_some(unit))
    }
}

/// The most a zone is ahead of UTC (Kiribati) and behind it (Baker
/// Island), in minutes.
pub const MAX_AHEAD: i64 = 14 * 60;
pub const MAX_BEHIND: i64 = 12 * 60;

/// A fixed offset from UTC written `+hh:mm` or `-hh:mm`, from `-12:00` to
/// `+14:00`, in seconds.
pub fn parse_offset(word: &[u8]) -> Option<i64> {
    let [sign, h1, h2, b':', m1, m2] = *word else {
        return None;
    };
    let digit = |b: u8| b.is_ascii_digit().then(|| i64::from(b - b'0'));
    let (hours, minutes) = (digit(h1)? * 10 + digit(h2)?, digit(m1)? * 10 + digit(m2)?);
    if minutes > 59 {
        return None;
    }
    let total = hours * 60 + minutes;
    match sign {
        b'+' if total <= MAX_AHEAD => Some(total * 60),
        b'-' if total <= MAX_BEHIND => Some(-total * 60),
        _ => None,
    }
}

/// Days since 1970-01-01 of a civil date (month 1 to 12, any year).
pub fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    // Years start in March so that the leap day ends them.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date `(year, month, day)` of a day counted from 1970-01-01.
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The end of the `unit` containing the instant `now` (ns since the
/// epoch) in the zone `offset` seconds ahead of UTC, in ns since the epoch:
/// the first instant of the next period. Computed in `i128`, so any `i64`
/// instant has an answer.
pub fn period_end(now: i64, unit: Unit, offset: i64) -> i128 {
    let s = i128::from(NANOS_PER_SEC);
    let local = i128::from(now) + i128::from(offset) * s;
    // Whole local seconds (towards minus infinity), as i64: any i64 ns
    // instant is within a few hundred years of 1970 in seconds.
    let secs = local.div_euclid(s) as i64;
    let end_local_secs = match unit {
        Unit::Minute => (secs.div_euclid(60) + 1) * 60,
        Unit::Hour => (secs.div_euclid(3_600) + 1) * 3_600,
        Unit::Day => (secs.div_euclid(DAY) + 1) * DAY,
        Unit::Week => {
            let days = secs.div_euclid(DAY);
            // 1970-01-01 was a Thursday: Monday is 0.
            let weekday = (days + 3).rem_euclid(7);
            (days - weekday + 7) * DAY
        }
        Unit::Month => {
            let (year, month, _) = civil_from_days(secs.div_euclid(DAY));
            let (year, month) = if month == 12 {
                (year + 1, 1)
            } else {
                (year, month + 1)
            };
            days_from_civil(year, month, 1) * DAY
        }
        Unit::Year => {
            let (year, _, _) = civil_from_days(secs.div_euclid(DAY));
            days_from_civil(year + 1, 1, 1) * DAY
        }
    };
    (i128::from(end_local_secs) - i128::from(offset)) * s
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// An independent calendar: walk day by day from 1970 with the leap
    /// year rule, no closed formula.
    fn naive_civil(mut days: i64) -> (i64, i64, i64) {
        let leap = |y: i64| (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
        let month_len = |y: i64, m: i64| match m {
            2 if leap(y) => 29,
            2 => 28,
            4 | 6 | 9 | 11 => 30,
            _ => 31,
        };
        let (mut y, mut m) = (1970i64, 1i64);
        if days >= 0 {
            loop {
                let len = if leap(y) { 366 } else { 365 };
                if days < len {
                    break;
                }
                days -= len;
                y += 1;
            }
        } else {
            while days < 0 {
                y -= 1;
                days += if leap(y) { 366 } else { 365 };
            }
        }
        while days >= month_len(y, m) {
            days -= month_len(y, m);
            m += 1;
        }
        (y, m, days + 1)
    }

    #[test]
    fn known_dates() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        // 2024 is a leap year, 2100 is not, 2000 was.
        let end_of_feb = |y| {
            let start = days_from_civil(y, 2, 1) * DAY * NANOS_PER_SEC;
            let end = period_end(start, Unit::Month, 0);
            (end / i128::from(NANOS_PER_SEC * DAY)) as i64 - days_from_civil(y, 2, 1)
        };
        assert_eq!(end_of_feb(2024), 29);
        assert_eq!(end_of_feb(2023), 28);
        assert_eq!(end_of_feb(2100), 28);
        assert_eq!(end_of_feb(2000), 29);
    }

    #[test]
    fn offsets() {
        assert_eq!(parse_offset(b"+00:00"), Some(0));
        assert_eq!(parse_offset(b"+09:00"), Some(9 * 3600));
        assert_eq!(parse_offset(b"-03:30"), Some(-(3 * 3600 + 1800)));
        assert_eq!(parse_offset(b"+14:00"), Some(14 * 3600));
        assert_eq!(parse_offset(b"-12:00"), Some(-12 * 3600));
        for bad in [
            "+14:01", "-12:01", "09:00", "+9:00", "+09:60", "+0900", "+09:00 ", "",
        ] {
            assert_eq!(parse_offset(bad.as_bytes()), None, "{bad:?}");
        }
        assert_eq!(parse_offset(b"\xff\xff:\xff\xff"), None, "not UTF-8");
    }

    #[test]
    fn weeks_start_on_monday() {
        // Thursday 2026-11-26 12:00 UTC: the week ends Monday 2026-11-30.
        let thu = (days_from_civil(2026, 11, 26) * DAY + 12 * 3600) * NANOS_PER_SEC;
        let monday = days_from_civil(2026, 11, 30) * DAY * NANOS_PER_SEC;
        assert_eq!(period_end(thu, Unit::Week, 0), i128::from(monday));
        // At Monday 00:00 exactly a new week starts.
        let next = monday + 7 * DAY * NANOS_PER_SEC;
        assert_eq!(period_end(monday, Unit::Week, 0), i128::from(next));
        assert_eq!(period_end(monday - 1, Unit::Week, 0), i128::from(monday));
        // In UTC+09:00, Sunday 20:00 UTC is already Monday 05:00 local.
        let sunday_20 = monday - 4 * 3600 * NANOS_PER_SEC;
        let local_monday_end = next - 9 * 3600 * NANOS_PER_SEC;
        assert_eq!(
            period_end(sunday_20, Unit::Week, 9 * 3600),
            i128::from(local_monday_end)
        );
    }

    proptest! {
        #[test]
        fn civil_round_trips_and_matches_a_day_by_day_walk(days in -200_000i64..200_000) {
            let (y, m, d) = civil_from_days(days);
            prop_assert_eq!(days_from_civil(y, m, d), days);
            prop_assert_eq!((y, m, d), naive_civil(days));
        }

        /// The end is after now, the period containing now is no longer
        /// than its unit allows, and one nanosecond before the end is in
        /// the same period (the end of that instant's period is the same).
        #[test]
        fn the_period_contains_now(
            now in any::<i64>(),
            offset_min in -MAX_BEHIND..=MAX_AHEAD,
            unit in prop::sample::select(vec![Unit::Minute, Unit::Hour, Unit::Day, Unit::Week, Unit::Month, Unit::Year]),
        ) {
            let offset = offset_min * 60;
            let end = period_end(now, unit, offset);
            prop_assert!(end > i128::from(now));
            let longest = match unit {
                Unit::Minute => 60, Unit::Hour => 3_600, Unit::Day => DAY, Unit::Week => 7 * DAY,
                Unit::Month => 31 * DAY, Unit::Year => 366 * DAY,
            };
            prop_assert!(end - i128::from(now) <= i128::from(longest) * i128::from(NANOS_PER_SEC));
            if let Ok(last) = i64::try_from(end - 1) {
                prop_assert_eq!(period_end(last, unit, offset), end);
            }
            // The local end falls on a boundary of its unit.
            let local_end_secs = (end / i128::from(NANOS_PER_SEC)) as i64 + offset;
            let (y, m, d) = civil_from_days(local_end_secs.div_euclid(DAY));
            let at_midnight = local_end_secs.rem_euclid(DAY) == 0;
            match unit {
                Unit::Minute => prop_assert_eq!(local_end_secs.rem_euclid(60), 0),
                Unit::Hour => prop_assert_eq!(local_end_secs.rem_euclid(3_600), 0),
                Unit::Day => prop_assert!(at_midnight),
                Unit::Week => prop_assert!(at_midnight && (local_end_secs.div_euclid(DAY) + 3).rem_euclid(7) == 0),
                Unit::Month => prop_assert!(at_midnight && d == 1),
                Unit::Year => prop_assert!(at_midnight && d == 1 && m == 1, "{}-{}-{}", y, m, d),
            }
        }
    }
}
