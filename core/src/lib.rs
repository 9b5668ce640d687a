//! Pure rate-limiting algorithms.
//!
//! Every function here maps `(old state, now, parameters)` to
//! `(decision, new state)` over integer nanoseconds since the Unix epoch.
//! There is no clock, no floating point and no `unsafe`, and no I/O but
//! reading the time zone database (`zoned::find`); every operation on
//! values that came from a client or a stored key is checked, so nothing
//! here can panic or overflow.

#![forbid(unsafe_code)]

pub mod acl;
pub mod calendar;
pub mod compat;
pub mod decimal;
pub mod fixed;
pub mod gcra;
pub mod lease;
pub mod options;
pub mod parse;
pub mod policy;
pub mod reply;
pub mod sliding;
pub mod sliding_approx;
pub mod top;
pub mod trial;
pub mod window_state;
pub mod zoned;

/// Nanoseconds in one second.
pub const NANOS_PER_SEC: i64 = 1_000_000_000;
/// Nanoseconds in one millisecond.
pub const NANOS_PER_MILLI: i64 = 1_000_000;

/// Why a set of parameters cannot be evaluated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamError {
    /// The rate is so high that one request would cost less than 1 ns.
    ZeroEmissionInterval,
    /// The nanosecond arithmetic of these parameters does not fit in 64 bits.
    Overflow,
}

/// The one rule at the end of 64-bit nanoseconds (2262-04-11T23:47:16Z):
/// a call whose arithmetic would reach past `i64::MAX` ns is refused with
/// [`ParamError::Overflow`] before anything is decided or written, whatever
/// the limiter. The instant each limiter reaches is the one where a state
/// made now would be back to full: `now + DVT` for GCRA, `now + window` for
/// the exact log, the end of the window after the current one for the
/// APPROX counter, the end of a window starting now for a fixed window
/// (rolling, aligned or calendar), `now + lease` for a lease. Each
/// limiter's `check` applies it.
pub fn within_64_bits(instant: i128) -> Result<(), ParamError> {
    if instant <= i128::from(i64::MAX) {
        Ok(())
    } else {
        Err(ParamError::Overflow)
    }
}

/// `a / b` (truncated) and `a.div_euclid(b)` for `i128` intermediates,
/// computed in 64 bits when both fit, as they do but for absurd states:
/// the same result without the 128-bit division routine, which costs
/// about a hundred instructions a call. `b` is never 0 here.
pub(crate) fn div(a: i128, b: i128) -> i128 {
    match (i64::try_from(a), i64::try_from(b)) {
        (Ok(x), Ok(y)) if y != 0 && (x, y) != (i64::MIN, -1) => i128::from(x / y),
        _ => a / b,
    }
}

/// See [`div`].
pub(crate) fn div_euclid(a: i128, b: i128) -> i128 {
    match (i64::try_from(a), i64::try_from(b)) {
        (Ok(x), Ok(y)) if y != 0 && (x, y) != (i64::MIN, -1) => i128::from(x.div_euclid(y)),
        _ => a.div_euclid(b),
    }
}

/// An `i128` intermediate clamped into `i64`: durations and instants that
/// only overflow for absurd stored states saturate instead of wrapping.
pub(crate) fn saturate(x: i128) -> i64 {
    i64::try_from(x).unwrap_or(if x < 0 { i64::MIN } else { i64::MAX })
}

#[cfg(test)]
mod division {
    use proptest::prelude::*;

    fn wide() -> impl Strategy<Value = i128> {
        prop_oneof![
            any::<i64>().prop_map(i128::from),
            any::<i128>(),
            Just(i128::from(i64::MIN)),
            Just(-1),
        ]
    }

    proptest! {
        #[test]
        fn as_128_bits_divide(a in wide(), b in wide()) {
            prop_assume!(b != 0 && !(a == i128::MIN && b == -1));
            prop_assert_eq!(super::div(a, b), a / b);
            prop_assert_eq!(super::div_euclid(a, b), a.div_euclid(b));
        }
    }
}

#[cfg(test)]
mod end_of_64_bits {
    use super::*;
    use crate::calendar::Unit;
    use crate::fixed::FixedWindow;
    use crate::gcra::Gcra;
    use crate::lease::Leases;
    use crate::sliding::{Log, SlidingWindow};
    use crate::sliding_approx::ApproxWindow;

    const S: i64 = NANOS_PER_SEC;
    const LATE: i64 = i64::MAX - 30 * S;
    const OVER: Result<(), ParamError> = Err(ParamError::Overflow);

    /// Every limiter: within up to exactly `i64::MAX` ns, refused 1 ns past.
    #[test]
    fn one_rule_for_every_limiter() {
        let gcra = |period| Gcra::new(0, 1, period).unwrap();
        assert_eq!(gcra(30 * S).check(LATE), Ok(()));
        assert!(gcra(30 * S).decide(None, LATE, 1).is_ok());
        assert_eq!(gcra(30 * S + 1).check(LATE), OVER);
        assert_eq!(
            gcra(30 * S + 1).decide(None, LATE, 0).err(),
            Some(ParamError::Overflow)
        );
        assert!(gcra(30 * S + 1).reserve(None, LATE, 1, S).is_err());

        let sw = |w| SlidingWindow::new(5, w).unwrap();
        assert_eq!(sw(30 * S).check(LATE), Ok(()));
        assert_eq!(sw(30 * S + 1).check(LATE), OVER);
        let mut log = Log::new();
        assert!(sliding::record(&mut log, 30 * S + 1, LATE, 1).is_err());
        assert!(log.is_empty());

        // APPROX: the end of the window after the current one.
        let approx = |w| ApproxWindow::new(5, w).unwrap();
        for w in [S, 10 * S, 20 * S, 30 * S, 7 * S + 3] {
            let end = (i128::from(LATE / w) + 2) * i128::from(w);
            let want = if end <= i128::from(i64::MAX) {
                Ok(())
            } else {
                OVER
            };
            assert_eq!(approx(w).check(LATE), want, "window {w}");
        }
        assert_eq!(approx(10 * S).check(LATE), Ok(()));
        assert_eq!(approx(20 * S).check(LATE), OVER);

        let fw = |w, align| FixedWindow::new(5, w, align).unwrap();
        assert_eq!(fw(30 * S, false).check(LATE), Ok(()));
        assert_eq!(fw(30 * S + 1, false).check(LATE), OVER);
        assert_eq!(fw(30 * S, true).check(LATE), Ok(()));
        assert_eq!(fw(40 * S, true).check(LATE), OVER);
        let cal = |unit| FixedWindow::calendar(5, unit, 0).unwrap();
        assert_eq!(cal(Unit::Minute).check(LATE), Ok(()));
        assert_eq!(cal(Unit::Hour).check(LATE), OVER);

        let leases = Leases::new();
        assert!(leases.acquire(5, LATE, 30 * S, None).is_ok());
        assert_eq!(
            leases.acquire(5, LATE, 30 * S + 1, None).err(),
            Some(ParamError::Overflow)
        );

        // At the last nanosecond, nothing with a duration fits.
        assert_eq!(gcra(1).check(i64::MAX), OVER);
        assert_eq!(sw(1).check(i64::MAX), OVER);
        assert_eq!(approx(1).check(i64::MAX), OVER);
        assert_eq!(fw(1, false).check(i64::MAX), OVER);
        assert!(leases.acquire(5, i64::MAX, 1, None).is_err());
    }
}
