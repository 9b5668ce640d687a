//! Refunds: give back what a request was charged but did not use.
//!
//! - `CL.REFUND key max_burst count_per_period period quantity [MS]`
//! - `SW.REFUND key limit window quantity [APPROX] [MS]`
//! - `FW.REFUND key limit window quantity [ALIGN] [TZ zone] [COUNTALL] [MS]`
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
use cell_core::options::{self, APPROX, MS, TZ};
use cell_core::reply::Unit;
use redis_module::Context;

pub fn cl(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.require(6)?;
    let options = args.options(6, &[MS])?;
    let limiter = Limiter::Gcra(limiter::gcra(args.word(2), args.word(3), args.word(4))?);
    refund(ctx, args, limiter, args.word(5), unit(&options))
}

pub fn sw(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.require(5)?;
    let options = args.options(5, &[APPROX, MS])?;
    let limiter = limiter::sliding(args.word(2), args.word(3), options.has(APPROX))?;
    refund(ctx, args, limiter, args.word(4), unit(&options))
}

pub fn fw(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.require(5)?;
    let options = args.options(5, &[options::ALIGN, TZ, options::COUNTALL, MS])?;
    let (align, countall) = (options.has(options::ALIGN), options.has(options::COUNTALL));
    let limiter = limiter::fixed(
        args.word(2),
        args.word(3),
        options.value(TZ),
        align,
        countall,
    )?;
    refund(ctx, args, limiter, args.word(4), unit(&options))
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

command! {
    CL_REFUND: "cl.refund" => cl,
    flags: super::REFUND,
    keys: First, key_use: ReadUpdate, role: Public,
    docs: Docs {
        summary: "Gives back up to `quantity` to a CL.THROTTLE bucket (never beyond full; a full bucket's key is deleted), and answers what CL.PEEK answers afterwards.",
        complexity: "O(1)",
        arity: -6,
        args: &[
            arg("key", Key),
            GCRA_LIMITER,
            arg("quantity", Integer),
            flag("MS"),
        ],
    },
}

command! {
    SW_REFUND: "sw.refund" => sw,
    flags: super::REFUND,
    keys: First, key_use: ReadDelete, role: Public,
    docs: Docs {
        summary: "Gives back up to `quantity` to a sliding window (newest requests first; with APPROX, the current window's count, then the previous one's), and answers what SW.PEEK answers afterwards.",
        complexity: "O(1) amortised; O(C) per 12 KiB chunk of the log given back",
        arity: -5,
        args: &[
            arg("key", Key),
            SW_LIMITER,
            arg("quantity", Integer),
            flag("APPROX"),
            flag("MS"),
        ],
    },
}

command! {
    FW_REFUND: "fw.refund" => fw,
    flags: super::REFUND,
    keys: First, key_use: ReadUpdate, role: Public,
    docs: Docs {
        summary: "Gives back up to `quantity` to a fixed window counter (not below 0, keeping its window's end), and answers what FW.PEEK answers afterwards.",
        complexity: "O(1)",
        arity: -5,
        args: &[
            arg("key", Key),
            arg("limit", Integer),
            arg(
                "window_or_unit",
                OneOf(&[arg("window", Duration), CALENDAR_UNIT]),
            ),
            arg("quantity", Integer),
            flag("ALIGN"),
            keyword("TZ", "zone", String),
            flag("COUNTALL"),
            flag("MS"),
        ],
    },
}
