//! Pure rate-limiting algorithms.
//!
//! Every function here maps `(old state, now, parameters)` to
//! `(decision, new state)` over integer nanoseconds since the Unix epoch.
//! There is no clock, no I/O, no floating point and no `unsafe`; every
//! operation on values that came from a client or a stored key is checked,
//! so nothing here can panic or overflow.

#![forbid(unsafe_code)]

pub mod calendar;
pub mod compat;
pub mod fixed;
pub mod gcra;
pub mod lease;
pub mod options;
pub mod parse;
pub mod reply;
pub mod sliding;
pub mod sliding_approx;
pub mod window_state;

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

/// An `i128` intermediate clamped into `i64`: durations and instants that
/// only overflow for absurd stored states saturate instead of wrapping.
pub(crate) fn saturate(x: i128) -> i64 {
    i64::try_from(x).unwrap_or(if x < 0 { i64::MIN } else { i64::MAX })
}
