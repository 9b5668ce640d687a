//! Refunds: give back what a request was charged but did not use.
//!
//! - `CL.REFUND key max_burst count_per_period period quantity [MS]`
//! - `SW.REFUND key limit window quantity [APPROX] [MS]`
//! - `FW.REFUND key limit window quantity [ALIGN] [MS]`
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
use cell_core::reply::Unit;
use redis_module::Context;

pub fn cl(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.expect_len(6, 7)?;
    let limiter = Limiter::Gcra(limiter::gcra(args.word(2), args.word(3), args.word(4))?);
    let options = args.options(6, &["MS"], false)?;
    refund(ctx, args, limiter, args.word(5), unit(&options, 0))
}

pub fn sw(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.expect_len(5, 7)?;
    let options = args.options(5, &["MS", "APPROX"], false)?;
    let limiter = limiter::sliding(args.word(2), args.word(3), options.has(1))?;
    refund(ctx, args, limiter, args.word(4), unit(&options, 0))
}

pub fn fw(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.expect_len(5, 9)?;
    let (tz, at) = super::fixed::tz(args);
    let options = args.options(at + 1, &["MS", "ALIGN"], false)?;
    let limiter = limiter::fixed(args.word(2), args.word(3), tz, options.has(1))?;
    refund(ctx, args, limiter, args.word(at), unit(&options, 0))
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
