//! `FW.INCR key limit window [quantity] [ALIGN] [MS]` and
//! `FW.PEEK key limit window [ALIGN] [MS]` (options in any order): a fixed window counter, stored
//! as a plain string integer with a TTL (what INCR + EXPIRE writes). A
//! calendar unit may replace the window: `FW.INCR key limit month
//! TZ +09:00 ...`.

use super::{single, unit};
use crate::args::Args;
use crate::error::CmdError;
use crate::handler::Reply;
use crate::limiter;
use crate::store::Access;
use cell_core::options::Opt;
use redis_module::Context;

const INCR: &[Opt] = &[
    Opt::Quantity(None),
    Opt::Flag("ALIGN"),
    Opt::Keyword("TZ"),
    Opt::Flag("MS"),
];
const PEEK: &[Opt] = &[Opt::Flag("ALIGN"), Opt::Keyword("TZ"), Opt::Flag("MS")];

pub fn incr(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.require(4)?;
    let options = args.options(4, INCR)?;
    let limiter = limiter::fixed(args.word(2), args.word(3), options.value(2), options.has(1))?;
    let quantity = options.quantity.unwrap_or(1);
    single(
        ctx,
        args,
        limiter,
        quantity,
        unit(&options, 3),
        Access::Write,
    )
}

pub fn peek(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.require(4)?;
    let options = args.options(4, PEEK)?;
    let limiter = limiter::fixed(args.word(2), args.word(3), options.value(1), options.has(0))?;
    single(ctx, args, limiter, 0, unit(&options, 2), Access::Read)
}
