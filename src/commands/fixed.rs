//! `FW.INCR key limit window [quantity] [ALIGN] [MS]` and
//! `FW.PEEK key limit window [ALIGN] [MS]`: a fixed window counter, stored
//! as a plain string integer with a TTL (what INCR + EXPIRE writes). A
//! calendar unit may replace the window: `FW.INCR key limit month
//! [TZ +09:00] ...`.

use super::{single, unit};
use crate::args::Args;
use crate::error::CmdError;
use crate::handler::Reply;
use crate::limiter;
use crate::store::Access;
use redis_module::Context;

const FLAGS: &[&str] = &["ALIGN", "MS"];

pub fn incr(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.expect_len(4, 9)?;
    let (tz, from) = tz(args);
    let options = args.options(from, FLAGS, true)?;
    let limiter = limiter::fixed(args.word(2), args.word(3), tz, options.has(0))?;
    let unit = unit(&options, 1);
    single(ctx, args, limiter, options.quantity, unit, Access::Write)
}

pub fn peek(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.expect_len(4, 8)?;
    let (tz, from) = tz(args);
    let options = args.options(from, FLAGS, false)?;
    let limiter = limiter::fixed(args.word(2), args.word(3), tz, options.has(0))?;
    single(ctx, args, limiter, 0, unit(&options, 1), Access::Read)
}

/// `TZ ±hh:mm` right after the window, if there, and where the optional
/// words start.
pub fn tz<'a>(args: &Args<'a>) -> (Option<&'a [u8]>, usize) {
    if limiter::is_tz(args.bytes(4)) {
        (Some(args.word(5)), 6)
    } else {
        (None, 4)
    }
}
