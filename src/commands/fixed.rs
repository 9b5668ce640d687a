//! `FW.INCR key limit window [quantity] [ALIGN] [MS] [SHADOW]` and
//! `FW.PEEK key limit window [ALIGN] [MS]` (options in any order): a fixed window counter, stored
//! as a plain string integer with a TTL (what INCR + EXPIRE writes). A
//! calendar unit may replace the window: `FW.INCR key limit month
//! TZ +09:00 ...`.

use super::{limit_command, peek_command};
use crate::args::Args;
use crate::error::CmdError;
use crate::handler::Reply;
use crate::limiter::Kind;
use redis_module::Context;

pub fn incr(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    limit_command(ctx, args, Kind::Fixed)
}

pub fn peek(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    peek_command(ctx, args, Kind::Fixed)
}
