//! `CL.TOP [COUNT n] [POLICY name [TRIAL]] [RESET]` (options in any
//! order): the keys refused most often, by every limiter command, by one
//! policy, or (`TRIAL`) the keys that policy's trial would have refused,
//! from a Space-Saving summary (`cell_core::top`). Each is answered as
//! `[key, count, error, shadow]`: at most `count` and at least
//! `count - error` refusals, of which `shadow` (counted since the key was
//! tracked) were answered allowed in shadow mode. `RESET` empties the
//! summary after answering. This node's refusals only; nothing is
//! replicated.

use crate::args::Args;
use crate::error::{self, CmdError};
use crate::handler::{Reply, Value};
use crate::policies;
use cell_core::options::{Opt, COUNT, POLICY, RESET, TRIAL};
use redis_module::Context;

const OPTIONS: &[Opt] = &[COUNT, POLICY, RESET, TRIAL];

/// Keys answered without `COUNT`.
const DEFAULT_COUNT: usize = 10;

pub fn top(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    crate::acl::check_admin(ctx, "cl.top")?;
    args.require(1)?;
    let options = args.options(1, OPTIONS)?;
    let count = match options.value(COUNT) {
        None => DEFAULT_COUNT,
        Some(word) => match cell_core::parse::integer(word)? {
            n if n < 1 => return Err(error::BAD_TOP_COUNT),
            n => usize::try_from(n).unwrap_or(usize::MAX),
        },
    };
    let reset = options.has(RESET);
    let offenders = match (options.has(TRIAL), options.value(POLICY)) {
        (false, policy) => policies::registry().top(count, policy, reset)?,
        (true, Some(name)) => policies::registry().trial_top(count, name, reset)?,
        (true, None) => return Err(error::TRIAL_WITHOUT_POLICY),
    };
    let rows = offenders
        .into_iter()
        .map(|o| {
            let int = |n: u64| Value::Int(i64::try_from(n).unwrap_or(i64::MAX));
            Value::Array(vec![
                Value::Bytes(o.key),
                int(o.count),
                int(o.error),
                int(o.shadow),
            ])
        })
        .collect();
    Ok(Reply::Value(Value::Array(rows)))
}

command! {
    CL_TOP: "cl.top" => top,
    flags: "readonly admin",
    keys: None, key_use: Read, role: Admin,
    docs: Docs {
        summary: "The keys refused most often (shadow refusals included), by all limiter commands, by one policy or by its trial, as [key, count, error, shadow] from a bounded Space-Saving summary; RESET empties it after answering.",
        complexity: "O(N) in the keys answered",
        arity: -1,
        args: &[
            keyword("COUNT", "n", Integer),
            keyword("POLICY", "name", ArgKind::String),
            flag("RESET"),
            flag("TRIAL"),
        ],
    },
}
