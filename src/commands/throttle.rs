//! `CL.THROTTLE key max_burst count_per_period period [quantity] [MS]` and
//! `CL.PEEK key max_burst count_per_period period [MS]`: GCRA,
//! state-compatible with the original redis-cell (a string holding the TAT
//! in nanoseconds).

use super::{single, unit};
use crate::args::Args;
use crate::error::CmdError;
use crate::handler::Reply;
use crate::limiter::{self, Limiter};
use crate::store::Access;
use redis_module::Context;

pub fn throttle(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.expect_len(5, 7)?;
    let limiter = params(args)?;
    let options = args.options(5, &["MS"], true)?;
    single(
        ctx,
        args,
        limiter,
        options.quantity,
        unit(&options, 0),
        Access::Write,
    )
}

pub fn peek(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.expect_len(5, 6)?;
    let limiter = params(args)?;
    let options = args.options(5, &["MS"], false)?;
    single(ctx, args, limiter, 0, unit(&options, 0), Access::Read)
}

fn params(args: &Args) -> Result<Limiter, CmdError> {
    Ok(Limiter::Gcra(limiter::gcra(
        args.word(2),
        args.word(3),
        args.word(4),
    )?))
}
