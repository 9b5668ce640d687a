//! `SW.ALLOW key limit window [quantity] [APPROX] [MS]` and
//! `SW.PEEK key limit window [APPROX] [MS]`: the exact sliding window log
//! (or, with APPROX, the two-window counter), stored in the module's own
//! data type; and the two commands that replay its effects:
//! `SW.RECORD key window_ns at_ns [quantity] [APPROX]` (replication, AOF) and
//! `SW.LOAD key payload` (AOF rewrite).

use super::{single, unit};
use crate::args::Args;
use crate::error::{self, CmdError};
use crate::handler::Reply;
use crate::limiter;
use crate::store::{Access, Key};
use crate::types::WINDOW_TYPE;
use cell_core::window_state::WindowState;
use redis_module::{raw, Context};

const FLAGS: &[&str] = &["APPROX", "MS"];

pub fn allow(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.expect_len(4, 7)?;
    let options = args.options(4, FLAGS, true)?;
    let word = |i| args.bytes(i).unwrap_or_default();
    let limiter = limiter::sliding(word(2), word(3), options.has(0))?;
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
    let limiter = limiter::sliding(word(2), word(3), options.has(0))?;
    single(ctx, args, limiter, 0, unit(&options, 1), Access::Read)
}

/// `SW.RECORD key window_ns at_ns [quantity] [APPROX]`: records a request
/// at an explicit time (quantity 1 when not given). It is what replicas and
/// the AOF receive for every allowed `SW.ALLOW`, so they hold the master's
/// state exactly.
pub fn record(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
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
        return Err(error::BAD_RECORD);
    }
    let mut key = Key::open(ctx, args.raw(1).ok_or(CmdError::WrongArity)?, Access::Write);
    limiter::record(&mut key, window, at, quantity, approx)?;
    ctx.replicate_verbatim();
    Ok(Reply::Ok)
}

/// `SW.LOAD key payload`: replaces the key's sliding window with a
/// serialized one (what an AOF rewrite emits), expiring when its newest
/// request leaves the window; an empty window deletes the key. The payload
/// must carry its window (payloads of redis-cell 0.1.0 do not).
pub fn load(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.expect_len(3, 3)?;
    let payload = args.bytes(2).unwrap_or_default();
    let state = WindowState::decode(payload).ok_or(error::BAD_PAYLOAD)?;
    if matches!(state, WindowState::Exact { window: None, .. }) {
        return Err(error::PAYLOAD_WITHOUT_WINDOW);
    }
    let mut key = Key::open(ctx, args.raw(1).ok_or(CmdError::WrongArity)?, Access::Write);
    let existing = key.value::<WindowState>(&WINDOW_TYPE)?;
    match state.expire_at_ms() {
        // Replicated as `DEL`.
        None => return key.delete(true).map(|_| Reply::Ok),
        Some(expire_at_ms) => {
            match existing {
                Some(slot) => *slot = state,
                None => {
                    key.set_value(&WINDOW_TYPE, state)?;
                }
            }
            key.changed();
            key.notify(raw::NotifyEvent::MODULE, c"sw.load");
            key.set_abs_expire(expire_at_ms)?;
        }
    }
    ctx.replicate_verbatim();
    Ok(Reply::Ok)
}
