//! `GCRA key max_burst tokens_per_period period [TOKENS count]`: the command
//! of Redis 8.8's milestones (held out of that release), for the clients
//! that shipped a method for it. Registered only when the module is loaded
//! with `gcra-command yes`, and never over a `GCRA` the server already has.
//!
//! Its arguments are read as the milestone's command reads them (canonical
//! integers, `period` a double in seconds, `TOKENS` only in the fifth
//! place), with its error texts. Its key is `CL.THROTTLE`'s: the same TAT
//! string in nanoseconds, decided, written, replicated and answered exactly
//! as `CL.THROTTLE key max_burst tokens_per_period period count` (seconds,
//! no `MS`, no `SHADOW`).

use super::{enforce, Watch};
use crate::args::Args;
use crate::clock;
use crate::error::{self, CmdError};
use crate::handler::Reply;
use crate::limiter::Limiter;
use cell_core::gcra::Gcra;
use cell_core::reply::Unit;
use cell_core::ParamError;
use redis_module::Context;

/// The milestone refuses periods from 10^12 seconds on.
const MAX_PERIOD_SECONDS: f64 = 1e12;

pub fn gcra(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    // Parsed in the milestone's order, so that a call with several wrong
    // arguments gets the error it would get there.
    args.require(5)?;
    if args.len() > 7 {
        return Err(CmdError::WrongArity);
    }
    let max_burst = canonical_integer(args.word(2))?;
    if max_burst < 0 {
        return Err(error::GCRA_NEGATIVE);
    }
    let tokens_per_period = positive(args.word(3))?;
    let period = period_nanos(args.word(4))?;
    let tokens = match (args.bytes(5), args.bytes(6)) {
        (None, _) => 1,
        (Some(word), _) if !word.eq_ignore_ascii_case(b"TOKENS") => return Err(error::SYNTAX),
        (Some(_), None) => return Err(error::GCRA_MISSING_TOKENS),
        (Some(_), Some(count)) => positive(count)?,
    };
    let limiter = Gcra::new(max_burst, tokens_per_period, period).map_err(|e| match e {
        ParamError::ZeroEmissionInterval => error::GCRA_RATE_TOO_HIGH,
        ParamError::Overflow => error::OVERFLOW,
    })?;
    enforce(
        ctx,
        args,
        Limiter::Gcra(limiter),
        tokens,
        Unit::Seconds,
        Watch::default(),
        clock::now_nanos(),
    )
}

/// An integer as Redis reads one (`string2ll`): an optional `-`, then
/// digits without a leading zero, and nothing else (no `+`, no `-0`).
fn canonical_integer(word: &[u8]) -> Result<i64, CmdError> {
    let value = cell_core::parse::integer(word)?;
    if value.to_string().as_bytes() == word {
        Ok(value)
    } else {
        Err(error::NOT_INTEGER)
    }
}

/// `tokens_per_period` and `TOKENS count`: from 1 to 2^63 - 1.
fn positive(word: &[u8]) -> Result<i64, CmdError> {
    match canonical_integer(word)? {
        n if n >= 1 => Ok(n),
        _ => Err(error::GCRA_RANGE),
    }
}

/// `period`, a double in seconds as Redis reads one (no leading space, the
/// whole word, not NaN, in range), from 0 (excluded) to 10^12 seconds
/// (excluded), rounded to the nearest nanosecond.
fn period_nanos(word: &[u8]) -> Result<i64, CmdError> {
    let text = std::str::from_utf8(word).map_err(|_| error::GCRA_NOT_FLOAT)?;
    if text.starts_with(|c: char| c.is_ascii_whitespace()) {
        return Err(error::GCRA_NOT_FLOAT);
    }
    let seconds: f64 = text.parse().map_err(|_| error::GCRA_NOT_FLOAT)?;
    let lower = text.to_ascii_lowercase();
    // strtod reports a finite number beyond the double's range (1e400) as
    // out of range, and so does Redis, where Rust answers infinity; and a
    // nonzero number below its range (1e-400), where Rust answers 0.
    let mantissa = lower.split('e').next().unwrap_or_default();
    let underflow = seconds == 0.0 && mantissa.bytes().any(|b| (b'1'..=b'9').contains(&b));
    if seconds.is_nan() || (seconds.is_infinite() && !lower.contains("inf")) || underflow {
        return Err(error::GCRA_NOT_FLOAT);
    }
    if seconds <= 0.0 || seconds >= MAX_PERIOD_SECONDS {
        return Err(error::GCRA_PERIOD_RANGE);
    }
    let nanos = (seconds * 1e9).round();
    // 10^12 s is beyond 64-bit nanoseconds (about 9.2 * 10^9 s).
    if nanos >= i64::MAX as f64 {
        return Err(error::OVERFLOW);
    }
    // Below half a nanosecond rounds to 0: no emission interval at all.
    if nanos < 1.0 {
        return Err(error::GCRA_RATE_TOO_HIGH);
    }
    Ok(nanos as i64)
}

command! {
    /// `GCRA` (Redis 8.8's milestone command), registered only when the module
    /// is loaded with `gcra-command yes` and the server has no `GCRA` of its
    /// own: never in [`ALL`].
    GCRA_COMMAND: "gcra" => gcra,
    flags: super::WRITE,
    keys: First, key_use: ReadUpdate, role: Public,
    docs: Docs {
        summary: "Redis 8.8's milestone GCRA command (opt-in: module argument gcra-command yes): CL.THROTTLE's decision, state and reply, with period a double in seconds and TOKENS count as the quantity.",
        complexity: "O(1)",
        arity: -5,
        args: &[
            arg("key", Key),
            arg("max_burst", Integer),
            arg("tokens_per_period", Integer),
            arg("period", Double),
            keyword("TOKENS", "count", Integer),
        ],
    },
}
