//! A policy's trial, run beside a call that uses the policy: its limiter
//! decides on a key of its own (`cell_core::trial::key`, in the call's
//! key's slot) at the call's instant, for the call's quantity, as if it
//! were enforced alone in a call of its own, and writes what that call
//! would write. Nothing of it reaches the call's reply, keys or counters:
//! it counts in the trial's counters and summary only.

use crate::limiter::Limiter;
use crate::policies::registry;
use crate::store::{Access, Key};
use cell_core::policy::Outcome;
use redis_module::Context;

/// Runs the trial `limiter` of `policy` for the call's key `key`. A trial
/// key that is one of the call's own keys (`taken`) is not touched (an
/// error for the trial), so that a trial never writes what the call
/// decides on; so is one whose state is not the trial's kind.
pub fn run(
    ctx: &Context,
    policy: &[u8],
    key: &[u8],
    limiter: &Limiter,
    now: i64,
    quantity: i64,
    taken: &dyn Fn(&[u8]) -> bool,
) {
    let name = cell_core::trial::key(key);
    let outcome = if taken(&name) {
        Outcome::Error
    } else {
        decide(ctx, &name, limiter, now, quantity).unwrap_or(Outcome::Error)
    };
    registry().record_trial(policy, outcome, key);
}

fn decide(
    ctx: &Context,
    name: &[u8],
    limiter: &Limiter,
    now: i64,
    quantity: i64,
) -> Option<Outcome> {
    let mut key = Key::open_derived(ctx, name, Access::Write).ok()?;
    let decided = limiter.decide(&mut key, now, quantity).ok()?;
    decided.apply(&mut key, !decided.verdict.limited).ok()?;
    Some(if decided.verdict.limited {
        Outcome::ShadowRefused
    } else {
        Outcome::Allowed
    })
}
