//! The five-integer reply shared by every command, and the one place where
//! nanosecond durations become whole seconds and sentinels.

use crate::{NANOS_PER_MILLI, NANOS_PER_SEC};

/// What every limiter answers, in nanoseconds, before formatting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// Whether the request was refused.
    pub limited: bool,
    /// The maximum quantity the key admits at once.
    pub limit: i64,
    /// What is left after this call, within `[0, limit]`.
    pub remaining: i64,
    /// How long to wait before this request would fit: `None` when it was
    /// allowed, or when it can never fit.
    pub retry_after: Option<i64>,
    /// How long until the key is back to its full limit.
    pub reset_after: i64,
}

impl Verdict {
    /// `[limited, limit, remaining, retry_after, reset_after]` with durations
    /// in whole seconds and `-1` for "no retry time".
    pub fn to_reply(&self) -> [i64; 5] {
        [
            i64::from(self.limited),
            self.limit,
            self.remaining,
            self.retry_after.map_or(-1, whole_seconds_rounded_up),
            whole_seconds_rounded_up(self.reset_after),
        ]
    }
}

/// Whole seconds of a duration, truncated toward zero, plus one when at
/// least one millisecond is left over: 10 s gives 10, 10.0005 s gives 10,
/// 10.001 s gives 11. A caller that waits this long is never early by more
/// than a millisecond.
pub fn whole_seconds_rounded_up(nanos: i64) -> i64 {
    let secs = nanos / NANOS_PER_SEC;
    let millis = (nanos % NANOS_PER_SEC) / NANOS_PER_MILLI;
    if millis > 0 {
        secs + 1
    } else {
        secs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_rule() {
        assert_eq!(whole_seconds_rounded_up(10 * NANOS_PER_SEC), 10);
        assert_eq!(whole_seconds_rounded_up(10 * NANOS_PER_SEC + 500_000), 10);
        assert_eq!(whole_seconds_rounded_up(10 * NANOS_PER_SEC + 1_000_000), 11);
        assert_eq!(whole_seconds_rounded_up(0), 0);
        assert_eq!(whole_seconds_rounded_up(999_999), 0);
        assert_eq!(whole_seconds_rounded_up(1_000_000), 1);
        assert_eq!(whole_seconds_rounded_up(-1_500_000_000), -1);
        assert_eq!(whole_seconds_rounded_up(i64::MAX), 9_223_372_037);
        assert_eq!(whole_seconds_rounded_up(i64::MIN), -9_223_372_036);
    }

    #[test]
    fn sentinel() {
        let v = Verdict {
            limited: true,
            limit: 3,
            remaining: 0,
            retry_after: None,
            reset_after: 0,
        };
        assert_eq!(v.to_reply(), [1, 3, 0, -1, 0]);
    }
}
