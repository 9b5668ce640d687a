//! `CL.RESERVE key max_burst count_per_period period [quantity] MAXWAIT seconds [MS]`:
//! the leaky bucket as a queue. Same parameters, state and key as
//! `CL.THROTTLE`: a request that fits now is admitted exactly as
//! `CL.THROTTLE` admits it; one whose slot comes within `MAXWAIT` takes
//! that slot now and is told how long to wait; any other is refused as
//! `CL.THROTTLE` refuses it.

use super::open_key;
use crate::args::{quantity, Args};
use crate::clock;
use crate::error::{self, CmdError};
use crate::handler::Reply;
use crate::limiter::{self, Write};
use crate::store::Access;
use cell_core::gcra::{Decision, Reservation};
use cell_core::reply::Unit;
use redis_module::Context;

pub fn reserve(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.expect_len(7, 9)?;
    let gcra = limiter::gcra(args.word(2), args.word(3), args.word(4))?;
    let (q, max_wait, unit) = options(args)?;
    let mut key = open_key(ctx, args, Access::Write)?;
    let tat = key.integer(error::INVALID_TAT)?;
    match gcra.reserve(tat, clock::now_nanos(), q, max_wait)? {
        Reservation::Now(decision, verdict) => {
            if let Decision::Allowed { tat, expire_at_ms } = decision {
                limiter::apply(&mut key, Write::Tat { tat, expire_at_ms })?;
            }
            Ok(Reply::Verdict(verdict, unit))
        }
        Reservation::Later {
            tat,
            expire_at_ms,
            wait,
            verdict,
        } => {
            limiter::apply(&mut key, Write::Tat { tat, expire_at_ms })?;
            Ok(Reply::Reserved(verdict, wait, unit))
        }
    }
}

/// `[quantity] MAXWAIT seconds [MS]` in any order: the quantity (default
/// 1), the longest wait in nanoseconds, and the unit.
fn options(args: &Args) -> Result<(i64, i64, Unit), CmdError> {
    let (mut q, mut max_wait, mut ms) = (None, None, false);
    let mut i = 5;
    while let Some(word) = args.bytes(i) {
        i += 1;
        if word.eq_ignore_ascii_case(b"MAXWAIT") && max_wait.is_none() {
            let value = args.bytes(i).ok_or(error::SYNTAX)?;
            i += 1;
            max_wait = Some(match cell_core::parse::seconds_as_nanos(value)? {
                w if w < 0 => return Err(error::NEGATIVE_MAXWAIT),
                w => w,
            });
        } else if word.eq_ignore_ascii_case(b"MS") && !ms {
            ms = true;
        } else if q.is_none()
            && !word.eq_ignore_ascii_case(b"MAXWAIT")
            && !word.eq_ignore_ascii_case(b"MS")
        {
            q = Some(quantity(word)?);
        } else {
            return Err(error::SYNTAX);
        }
    }
    let max_wait = max_wait.ok_or(error::MAXWAIT_MISSING)?;
    let unit = if ms { Unit::Millis } else { Unit::Seconds };
    Ok((q.unwrap_or(1), max_wait, unit))
}
