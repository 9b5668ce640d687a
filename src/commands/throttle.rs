//! `CL.THROTTLE key max_burst count_per_period period [quantity] [MS] [SHADOW]` and
//! `CL.PEEK key max_burst count_per_period period [MS]` (options in any
//! order): GCRA,
//! state-compatible with the original redis-cell (a string holding the TAT
//! in nanoseconds).

use super::{limit_command, peek_command};
use crate::args::Args;
use crate::error::CmdError;
use crate::handler::Reply;
use crate::limiter::Kind;
use redis_module::Context;

pub fn throttle(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    limit_command(ctx, args, Kind::Gcra)
}

pub fn peek(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    peek_command(ctx, args, Kind::Gcra)
}
