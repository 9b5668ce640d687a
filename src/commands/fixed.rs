//! `FW.INCR key limit window [quantity] [ALIGN]`: a fixed window counter,
//! stored as a plain string integer with a TTL (what INCR + EXPIRE writes).

use crate::args::Args;
use crate::clock;
use crate::error::{self, CmdError};
use crate::handler::Reply;
use crate::store::Key;
use cell_core::fixed::{Counter, Effect, FixedWindow};
use redis_module::Context;

pub fn incr(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.expect_len(4, 6)?;
    let limit = args.limit(2)?;
    let window = args.window(3)?;
    let (quantity, align) = args.quantity_and_flag(4, "ALIGN")?;
    let fw = FixedWindow::new(limit, window, align)?;
    let key = Key::open(ctx, args.raw(1).ok_or(CmdError::WrongArity)?, true);
    let found = key.integer(error::INVALID_COUNTER)?.map(|count| Counter {
        count,
        expire_at_ms: key.abs_expire(),
    });
    let outcome = fw.decide(found, clock::now_nanos(), quantity);
    match outcome.effect {
        Effect::None => {}
        Effect::Store {
            count,
            expire_at_ms,
        } => {
            let current = found.and_then(|c| c.expire_at_ms);
            key.set_integer_expiring_at(count, expire_at_ms, current, c"incrby")?
        }
        Effect::Expire { expire_at_ms } => key.expire_at(expire_at_ms)?,
    }
    Ok(Reply::Verdict(outcome.verdict))
}
