//! `CL.LIMIT key policy [quantity] [MS] [SHADOW]` (options in any order):
//! the limiter a named policy holds, applied to one key. The decision, the
//! reply and what is written are exactly those of the policy's limiter
//! given as arguments (`CL.THROTTLE`, `SW.ALLOW` or `FW.INCR`) at that
//! instant; the call is counted for the policy and a refusal recorded for
//! `CL.TOP`.

use super::{enforce, unit, Watch};
use crate::args::Args;
use crate::error::CmdError;
use crate::handler::Reply;
use crate::policy;
use cell_core::options::Opt;
use redis_module::Context;

const OPTIONS: &[Opt] = &[Opt::Quantity(None), Opt::Flag("MS"), Opt::Flag("SHADOW")];

pub fn limit(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.require(3)?;
    let options = args.options(3, OPTIONS)?;
    let name = args.word(2);
    let (limiter, shadow) = policy::registry().lookup(name)?;
    let watch = Watch {
        shadow: shadow || options.has(2),
        policy: Some(name),
    };
    let quantity = options.quantity.unwrap_or(1);
    enforce(ctx, args, limiter, quantity, unit(&options, 1), watch)
}
