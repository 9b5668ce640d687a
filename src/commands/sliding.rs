//! `SW.ALLOW key limit window [quantity] [APPROX] [MS] [SHADOW]` and
//! `SW.PEEK key limit window [APPROX] [MS]`: the exact sliding window log
//! (or, with APPROX, the two-window counter), stored in the module's own
//! data type; and the two commands that replay its effects:
//! `SW.RECORD` and `SW.UNRECORD key window_ns at_ns [quantity] [APPROX]`
//! (replication, AOF) and `SW.LOAD key payload` (AOF rewrite).

use super::{limit_command, open_key, peek_command};
use crate::args::Args;
use crate::error::{self, CmdError};
use crate::handler::Reply;
use crate::limiter::{self, Kind};
use crate::store::Access;
use crate::types::WINDOW_TYPE;
use cell_core::window_state::WindowState;
use redis_module::Context;

pub fn allow(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    limit_command(ctx, args, Kind::Sliding)
}

pub fn peek(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    peek_command(ctx, args, Kind::Sliding)
}

/// `SW.RECORD key window_ns at_ns [quantity] [APPROX]`: records a request
/// at an explicit time (quantity 1 when not given). It is what replicas and
/// the AOF receive for every allowed `SW.ALLOW`, so they hold the master's
/// state exactly.
pub fn record(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    let (window, at, quantity, approx) = effect(args, error::BAD_RECORD)?;
    let mut key = open_key(ctx, args, Access::Write)?;
    limiter::record(&mut key, window, at, quantity, approx)?;
    ctx.replicate_verbatim();
    Ok(Reply::Ok)
}

/// `SW.UNRECORD key window_ns at_ns [quantity] [APPROX]`: gives back
/// `quantity` at an explicit time. It is what replicas and the AOF receive
/// for every `SW.REFUND`, so they hold the master's state exactly.
pub fn unrecord(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    let (window, at, quantity, approx) = effect(args, error::BAD_UNRECORD)?;
    let mut key = open_key(ctx, args, Access::Write)?;
    limiter::unrecord(&mut key, window, at, quantity, approx)?;
    ctx.replicate_verbatim();
    Ok(Reply::Ok)
}

/// The arguments of a window effect, `window_ns at_ns [quantity] [APPROX]`,
/// checked (`invalid` when out of range).
fn effect(args: &Args, invalid: CmdError) -> Result<(i64, i64, i64, bool), CmdError> {
    args.expect_len(4, 6)?;
    let window = args.integer(2)?;
    let at = args.integer(3)?;
    let is_approx = |i| {
        args.bytes(i)
            .is_some_and(|b| b.eq_ignore_ascii_case(b"APPROX"))
    };
    let (quantity, approx) = match args.len() {
        4 => (1, false),
        5 if is_approx(4) => (1, true),
        5 => (args.integer(4)?, false),
        _ if is_approx(5) => (args.integer(4)?, true),
        _ => return Err(error::SYNTAX),
    };
    if window < 1 || at < 0 || quantity < 1 {
        return Err(invalid);
    }
    Ok((window, at, quantity, approx))
}

/// `SW.LOAD key payload`: replaces the key's sliding window with a
/// serialized one (what an AOF rewrite emits), expiring when its newest
/// request leaves the window; an empty window deletes the key. The payload
/// must carry its window (payloads of redis-cell 0.1.0 do not).
pub fn load(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.expect_len(3, 3)?;
    let payload = args.word(2);
    let state = WindowState::decode(payload).ok_or(error::BAD_PAYLOAD)?;
    if matches!(state, WindowState::Exact { window: None, .. }) {
        return Err(error::PAYLOAD_WITHOUT_WINDOW);
    }
    let mut key = open_key(ctx, args, Access::Write)?;
    let expire_at_ms = state.expire_at_ms();
    if key.load(&WINDOW_TYPE, state, expire_at_ms, c"sw.load")? {
        ctx.replicate_verbatim();
    }
    Ok(Reply::Ok)
}
