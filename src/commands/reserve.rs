//! `CL.RESERVE key max_burst count_per_period period [quantity] MAXWAIT duration [MS]`
//! (options in any order):
//! the leaky bucket as a queue. Same parameters, state and key as
//! `CL.THROTTLE`: a request that fits now is admitted exactly as
//! `CL.THROTTLE` admits it; one whose slot comes within `MAXWAIT` takes
//! that slot now and is told how long to wait; any other is refused as
//! `CL.THROTTLE` refuses it.

use super::{open_key, unit};
use crate::args::Args;
use crate::clock;
use crate::error::{self, CmdError};
use crate::handler::Reply;
use crate::limiter::{self, Write};
use crate::store::Access;
use cell_core::gcra::{Decision, Reservation};
use cell_core::options::{self, Opt, MAXWAIT};
use redis_module::Context;

const OPTIONS: &[Opt] = &[options::QUANTITY, MAXWAIT, options::MS];

pub fn reserve(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.require(5)?;
    let options = args.options(5, OPTIONS)?;
    let gcra = limiter::gcra(args.word(2), args.word(3), args.word(4))?;
    let max_wait = match options.value(MAXWAIT) {
        None => return Err(error::MAXWAIT_MISSING),
        Some(word) => match error::duration(word, error::BAD_MAXWAIT)? {
            w if w < 0 => return Err(error::NEGATIVE_MAXWAIT),
            w => w,
        },
    };
    let (q, unit) = (options.quantity.unwrap_or(1), unit(&options));
    let mut key = open_key(ctx, args, Access::Write)?;
    let tat = key.integer(error::INVALID_TAT)?;
    match gcra.reserve(tat, clock::now_nanos(), q, max_wait)? {
        Reservation::Now(decision, verdict) => {
            if let Decision::Allowed { tat, expire_at_ms } = decision {
                limiter::apply(&mut key, Write::Tat { tat, expire_at_ms })?;
            }
            Ok(Reply::Verdict(verdict, unit))
        }
        Reservation::Later {
            tat,
            expire_at_ms,
            wait,
            verdict,
        } => {
            limiter::apply(&mut key, Write::Tat { tat, expire_at_ms })?;
            Ok(Reply::Reserved(verdict, wait, unit))
        }
    }
}

command! {
    CL_RESERVE: "cl.reserve" => reserve,
    flags: super::WRITE,
    keys: First, key_use: ReadUpdate, role: Public,
    docs: Docs {
        summary: "GCRA as a queue: admits now as CL.THROTTLE, or takes the next slot when it comes within MAXWAIT and answers [0, limit, remaining, wait, reset_after] (wait rounded up), or refuses as CL.THROTTLE.",
        complexity: "O(1)",
        arity: -5,
        args: &[
            arg("key", Key),
            GCRA_LIMITER,
            optional("quantity", Integer),
            keyword_required("MAXWAIT", "duration", Duration),
            flag("MS"),
        ],
    },
}
