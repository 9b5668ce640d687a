//! Refunds: give back what a request was charged but did not use.
//!
//! - `CL.REFUND key max_burst count_per_period period quantity [MS]`
//! - `SW.REFUND key limit window quantity [APPROX] [MS]`
//! - `FW.REFUND key limit window quantity [ALIGN] [TZ zone] [MS]`
//!
//! (options in any order)
//!
//! Each gives back up to `quantity`, never beyond a full limiter, and
//! answers what the limiter's peek answers afterwards. A refund that empties
//! a limiter deletes its key; an absent key is already full. Replicas and
//! the AOF receive the new state (`SET ... PXAT`, `DEL`) or, for a window
//! log, `SW.UNRECORD` (in `sliding.rs`).

use super::{open_key, unit};
use crate::args::{quantity, Args};
use crate::clock;
use crate::error::CmdError;
use crate::handler::Reply;
use crate::limiter::{self, Limiter};
use crate::store::Access;
use cell_core::options::Opt;
use cell_core::reply::Unit;
use redis_module::Context;

pub fn cl(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.require(6)?;
    let options = args.options(6, &[Opt::Flag("MS")])?;
    let limiter = Limiter::Gcra(limiter::gcra(args.word(2), args.word(3), args.word(4))?);
    refund(ctx, args, limiter, args.word(5), unit(&options, 0))
}

pub fn sw(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.require(5)?;
    let options = args.options(5, &[Opt::Flag("APPROX"), Opt::Flag("MS")])?;
    let limiter = limiter::sliding(args.word(2), args.word(3), options.has(0))?;
    refund(ctx, args, limiter, args.word(4), unit(&options, 1))
}

pub fn fw(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.require(5)?;
    let spec = &[Opt::Flag("ALIGN"), Opt::Keyword("TZ"), Opt::Flag("MS")];
    let options = args.options(5, spec)?;
    let limiter = limiter::fixed(args.word(2), args.word(3), options.value(1), options.has(0))?;
    refund(ctx, args, limiter, args.word(4), unit(&options, 2))
}

fn refund(
    ctx: &Context,
    args: &Args,
    limiter: Limiter,
    q: &[u8],
    unit: Unit,
) -> Result<Reply, CmdError> {
    let q = quantity(q)?;
    let mut key = open_key(ctx, args, Access::Write)?;
    let verdict = limiter.refund(&mut key, clock::now_nanos(), q)?;
    Ok(Reply::Verdict(verdict, unit))
}
