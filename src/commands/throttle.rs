//! `CL.THROTTLE key max_burst count_per_period period [quantity] [MS]` and
//! `CL.PEEK key max_burst count_per_period period [MS]` (options in any
//! order): GCRA,
//! state-compatible with the original redis-cell (a string holding the TAT
//! in nanoseconds).

use super::{single, unit};
use crate::args::Args;
use crate::error::CmdError;
use crate::handler::Reply;
use crate::limiter::{self, Limiter};
use crate::store::Access;
use cell_core::options::Opt;
use redis_module::Context;

const THROTTLE: &[Opt] = &[Opt::Quantity(None), Opt::Flag("MS")];
const PEEK: &[Opt] = &[Opt::Flag("MS")];

pub fn throttle(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.require(5)?;
    let options = args.options(5, THROTTLE)?;
    let limiter = params(args)?;
    let quantity = options.quantity.unwrap_or(1);
    single(
        ctx,
        args,
        limiter,
        quantity,
        unit(&options, 1),
        Access::Write,
    )
}

pub fn peek(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.require(5)?;
    let options = args.options(5, PEEK)?;
    let limiter = params(args)?;
    single(ctx, args, limiter, 0, unit(&options, 0), Access::Read)
}

fn params(args: &Args) -> Result<Limiter, CmdError> {
    Ok(Limiter::Gcra(limiter::gcra(
        args.word(2),
        args.word(3),
        args.word(4),
    )?))
}
