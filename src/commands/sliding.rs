//! `SW.ALLOW key limit window [quantity] [APPROX]`: the exact sliding window
//! log (or, with APPROX, the two-window counter), stored in the module's
//! own data type; and the two commands that replay its effects:
//! `SW.RECORD key window_ns at_ns quantity [APPROX]` (replication, AOF) and
//! `SW.LOAD key payload` (AOF rewrite).

use crate::args::Args;
use crate::clock;
use crate::error::{self, CmdError};
use crate::handler::Reply;
use crate::store::Key;
use cell_core::sliding::{self, Log, SlidingWindow};
use cell_core::sliding_approx::{self, ApproxWindow};
use cell_core::window_state::WindowState;
use redis_module::{raw, Context};

pub fn allow(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.expect_len(4, 6)?;
    let limit = args.limit(2)?;
    let window = args.window(3)?;
    let (quantity, approx) = args.quantity_and_flag(4, "APPROX")?;
    let mut key = Key::open(ctx, args.raw(1).ok_or(CmdError::WrongArity)?, true);
    let now = clock::now_nanos();
    let (record_at, verdict) = match (key.window()?, approx) {
        (Some(WindowState::Approx(_)), false) => return Err(error::APPROX_KEY),
        (Some(WindowState::Exact(_)), true) => return Err(error::EXACT_KEY),
        (Some(WindowState::Exact(log)), false) => exact(limit, window, log, now, quantity)?,
        (None, false) => exact(limit, window, &Log::new(), now, quantity)?,
        (Some(WindowState::Approx(c)), true) => counter(limit, window, Some(*c), now, quantity)?,
        (None, true) => counter(limit, window, None, now, quantity)?,
    };
    if let Some(at) = record_at {
        apply(&mut key, window, at, quantity, approx)?;
        key.replicate_sw_record(window, at, quantity, approx);
    }
    Ok(Reply::Verdict(verdict))
}

type Decided = (Option<i64>, cell_core::reply::Verdict);

fn exact(limit: i64, window: i64, log: &Log, now: i64, quantity: i64) -> Result<Decided, CmdError> {
    let (decision, verdict) = SlidingWindow::new(limit, window)?.decide(log, now, quantity);
    let record_at = match decision {
        sliding::Decision::Allowed { record_at } => record_at,
        _ => None,
    };
    Ok((record_at, verdict))
}

fn counter(
    limit: i64,
    window: i64,
    state: Option<sliding_approx::Counter>,
    now: i64,
    quantity: i64,
) -> Result<Decided, CmdError> {
    let (decision, verdict) = ApproxWindow::new(limit, window)?.decide(state, now, quantity);
    let record_at = match decision {
        sliding_approx::Decision::Allowed { counter: Some(_) } => Some(now),
        _ => None,
    };
    Ok((record_at, verdict))
}

/// Records a request at `at`, fires `sw.allow` and sets the key's expiry:
/// the one write path, shared by `SW.ALLOW` on the master and `SW.RECORD`
/// on replicas and AOF.
fn apply(key: &mut Key, window: i64, at: i64, quantity: i64, approx: bool) -> Result<(), CmdError> {
    let expire_at_ms = match (key.window()?, approx) {
        (Some(WindowState::Approx(_)), false) => return Err(error::APPROX_KEY),
        (Some(WindowState::Exact(_)), true) => return Err(error::EXACT_KEY),
        (Some(WindowState::Exact(log)), false) => {
            sliding::record(log, window, at, quantity).map_err(|_| error::BAD_RECORD)?;
            sliding::expire_at_ms(log, window)
        }
        (Some(WindowState::Approx(c)), true) => {
            *c = sliding_approx::record(Some(*c), window, at, quantity);
            Some(c.expire_at_ms())
        }
        (None, false) => {
            let mut log = Log::new();
            sliding::record(&mut log, window, at, quantity).map_err(|_| error::BAD_RECORD)?;
            let expire = sliding::expire_at_ms(&log, window);
            key.set_window(WindowState::Exact(log))?;
            expire
        }
        (None, true) => {
            let c = sliding_approx::record(None, window, at, quantity);
            key.set_window(WindowState::Approx(c))?;
            Some(c.expire_at_ms())
        }
    };
    key.notify(raw::NotifyEvent::MODULE, c"sw.allow");
    if let Some(ms) = expire_at_ms {
        key.set_abs_expire(ms)?;
    }
    Ok(())
}

/// `SW.RECORD key window_ns at_ns quantity [APPROX]`: records a request at
/// an explicit time. It is what replicas and the AOF receive for every
/// allowed `SW.ALLOW`, so they hold the master's state exactly.
pub fn record(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.expect_len(5, 6)?;
    let window = args.integer(2)?;
    let at = args.integer(3)?;
    let quantity = args.integer(4)?;
    let approx = match args.bytes(5) {
        None => false,
        Some(b) if b.eq_ignore_ascii_case(b"APPROX") => true,
        Some(_) => return Err(error::SYNTAX),
    };
    if window < 1 || at < 0 || quantity < 1 {
        return Err(error::BAD_RECORD);
    }
    let mut key = Key::open(ctx, args.raw(1).ok_or(CmdError::WrongArity)?, true);
    apply(&mut key, window, at, quantity, approx)?;
    ctx.replicate_verbatim();
    Ok(Reply::Ok)
}

/// `SW.LOAD key payload`: replaces the key's sliding window with a
/// serialized one (what an AOF rewrite emits; the TTL follows separately).
pub fn load(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.expect_len(3, 3)?;
    let payload = args.bytes(2).unwrap_or_default();
    let state = WindowState::decode(payload).ok_or(error::BAD_PAYLOAD)?;
    let mut key = Key::open(ctx, args.raw(1).ok_or(CmdError::WrongArity)?, true);
    match key.window()? {
        Some(existing) => *existing = state,
        None => {
            key.set_window(state)?;
        }
    }
    ctx.replicate_verbatim();
    Ok(Reply::Ok)
}
