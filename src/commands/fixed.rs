//! `FW.INCR key limit window [quantity] [ALIGN] [MS]` and
//! `FW.PEEK key limit window [ALIGN] [MS]`: a fixed window counter, stored
//! as a plain string integer with a TTL (what INCR + EXPIRE writes).

use super::{single, unit};
use crate::args::Args;
use crate::error::CmdError;
use crate::handler::Reply;
use crate::limiter;
use crate::store::Access;
use redis_module::Context;

const FLAGS: &[&str] = &["ALIGN", "MS"];

pub fn incr(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.expect_len(4, 7)?;
    let options = args.options(4, FLAGS, true)?;
    let word = |i| args.bytes(i).unwrap_or_default();
    let limiter = limiter::fixed(word(2), word(3), options.has(0))?;
    single(
        ctx,
        args,
        limiter,
        options.quantity,
        unit(&options, 1),
        Access::Write,
    )
}

pub fn peek(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.expect_len(4, 6)?;
    let options = args.options(4, FLAGS, false)?;
    let word = |i| args.bytes(i).unwrap_or_default();
    let limiter = limiter::fixed(word(2), word(3), options.has(0))?;
    single(ctx, args, limiter, 0, unit(&options, 1), Access::Read)
}
