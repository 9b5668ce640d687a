//! `CL.LIMIT key policy [quantity] [MS] [SHADOW]` (options in any order):
//! the limiter a named policy holds, applied to one key. The decision, the
//! reply and what is written are exactly those of the policy's limiter
//! given as arguments (`CL.THROTTLE`, `SW.ALLOW` or `FW.INCR`) at that
//! instant; the call is counted for the policy and a refusal recorded for
//! `CL.TOP`. A policy's trial then runs on its own key at the same
//! instant (see `trial`), which changes nothing of the call's.

use super::{by_policy, unit, Call};
use crate::args::Args;
use crate::clock;
use crate::error::CmdError;
use crate::handler::Reply;
use crate::policies;
use cell_core::options::{self, Opt};
use redis_module::Context;

const OPTIONS: &[Opt] = &[options::QUANTITY, options::MS, options::SHADOW];

pub fn limit(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.require(3)?;
    let options = args.options(3, OPTIONS)?;
    let name = args.word(2);
    let found = policies::registry().lookup(name)?;
    let call = Call {
        quantity: options.quantity.unwrap_or(1),
        unit: unit(&options),
        shadow: options.has(options::SHADOW),
    };
    by_policy(ctx, args, name, found, call, clock::now_nanos())
}

command! {
    CL_LIMIT: "cl.limit" => limit,
    flags: super::WRITE,
    keys: First, key_use: ReadUpdate, role: Public,
    docs: Docs {
        summary: "Applies a named policy's limiter (see CL.POLICY) to a key: decides, writes and answers exactly as that limiter given as arguments, counts the call for the policy and records a refusal for CL.TOP.",
        complexity: "O(1), as the policy's limiter",
        arity: -3,
        args: &[
            arg("key", Key),
            arg("policy", ArgKind::String),
            optional("quantity", Integer),
            flag("MS"),
            flag("SHADOW"),
        ],
    },
}
