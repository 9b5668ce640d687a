//! `CL.THROTTLE key max_burst count_per_period period [quantity]` and
//! `CL.PEEK key max_burst count_per_period period`: GCRA, state-compatible
//! with the original redis-cell (a string holding the TAT in nanoseconds).

use crate::args::Args;
use crate::clock;
use crate::error::{self, CmdError};
use crate::handler::Reply;
use crate::store::Key;
use cell_core::gcra::{Decision, Gcra};
use redis_module::Context;

pub fn throttle(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.expect_len(5, 6)?;
    let gcra = params(args)?;
    let quantity = args.quantity(5)?;
    run(ctx, args, &gcra, quantity, true)
}

pub fn peek(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.expect_len(5, 5)?;
    let gcra = params(args)?;
    run(ctx, args, &gcra, 0, false)
}

fn params(args: &Args) -> Result<Gcra, CmdError> {
    let max_burst = args.integer(2)?;
    let count = args.integer(3)?;
    let period = args.seconds(4)?;
    if max_burst < 0 {
        return Err(error::NEGATIVE_MAX_BURST);
    }
    if count < 1 {
        return Err(error::COUNT_NOT_POSITIVE);
    }
    if period < 1 {
        return Err(error::PERIOD_NOT_POSITIVE);
    }
    Ok(Gcra::new(max_burst, count, period)?)
}

fn run(
    ctx: &Context,
    args: &Args,
    gcra: &Gcra,
    quantity: i64,
    write: bool,
) -> Result<Reply, CmdError> {
    let name = args.raw(1).ok_or(CmdError::WrongArity)?;
    let key = Key::open(ctx, name, write);
    let tat = key.integer(error::INVALID_TAT)?;
    let now = clock::now_nanos();
    let (decision, verdict) = gcra.decide(tat, now, quantity)?;
    if write {
        if let Decision::Allowed { tat, expire_at_ms } = decision {
            key.set_integer_expiring_at(tat, expire_at_ms, None, c"set")?;
        }
    }
    Ok(Reply::Verdict(verdict))
}
