//! `CL.THROTTLEALL numkeys key [key ...] limiter [limiter ...] [QUANTITY q] [MS] [SHADOW]`
//! with `limiter := GCRA max_burst count_per_period period
//!                | SW limit window [APPROX]
//!                | FW limit window-or-unit [ALIGN] [TZ zone]
//!                | POLICY name`:
//! several limits in one atomic, all-or-nothing call. Each limiter's
//! options come in any order after its parameters; the call's own after
//! the last limiter's, mixed with that limiter's.
//!
//! Every limiter decides at the same instant exactly as its own command
//! would for quantity `q` on its key. Only if all of them allow is every
//! key written, as its own command would write it; otherwise nothing is
//! (but for what a single command also writes when refused). The reply is
//! the binding limiter's five integers and its 1-based index.
//!
//! A refusal by a limiter in shadow mode (the call's `SHADOW`, or a policy
//! set with `SHADOW`) writes what the refusal writes but does not bind:
//! when only such limiters refused, the reply says allowed.

use crate::args::Args;
use crate::clock;
use crate::error::{self, CmdError};
use crate::handler::Reply;
use crate::limiter::{self, Limiter};
use crate::policy::{self, Refusal};
use crate::store::{Access, Key};
use cell_core::options::{self, Opt};
use cell_core::policy::Outcome;
use cell_core::reply::{binding_of, Unit, Verdict};
use redis_module::Context;

pub fn throttle_all(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    if is_keys_position_request(ctx) {
        report_keys(ctx, args);
        return Ok(Reply::KeysReported);
    }
    // The shortest call: `CL.THROTTLEALL 1 key POLICY name`.
    args.require(5)?;
    let call = parse(args)?;
    // One instant for all; every state is read (and every type checked)
    // before anything is written.
    let now = clock::now_nanos();
    let mut keys = Vec::with_capacity(call.limiters.len());
    for (i, limiter) in call.limiters.iter().enumerate() {
        let name = args.raw(2 + i).ok_or(CmdError::WrongArity)?;
        let mut key = Key::open(ctx, name, Access::Write);
        let decided = match limiter.limiter.decide(&mut key, now, call.quantity) {
            Ok(decided) => decided,
            Err(e) => {
                count_error(&call);
                return Err(e);
            }
        };
        keys.push((key, decided));
    }
    let (b, verdict) = binding_of(keys.iter().map(|(_, d)| d.verdict)).ok_or(error::INTERNAL)?;
    for (key, decided) in keys.iter_mut() {
        decided.apply(key, !verdict.limited)?;
    }
    // A refusal binds only when it comes from a limiter that enforces;
    // what is written is what enforcing writes either way.
    let enforced = |i: usize, v: &Verdict| {
        let shadow = call.shadow || call.limiters.get(i).is_some_and(|l| l.shadow);
        if v.limited && shadow {
            Verdict {
                limited: false,
                retry_after: None,
                ..*v
            }
        } else {
            *v
        }
    };
    let answered = keys
        .iter()
        .enumerate()
        .map(|(i, (_, d))| enforced(i, &d.verdict));
    let (b_shown, shown) = binding_of(answered).ok_or(error::INTERNAL)?;
    {
        let mut registry = policy::registry();
        for (i, (limiter, (_, decided))) in call.limiters.iter().zip(&keys).enumerate() {
            let shadow = call.shadow || limiter.shadow;
            let refused = decided.verdict.limited;
            let outcome = match (refused, shadow) {
                (false, _) => Outcome::Allowed,
                (true, false) => Outcome::Refused,
                (true, true) => Outcome::ShadowRefused,
            };
            let refusal = refused.then(|| Refusal {
                key: args.word(2 + i),
                shadow,
            });
            if limiter.policy.is_some() || refusal.is_some() {
                registry.record(limiter.policy, outcome, refusal);
            }
        }
    }
    Ok(if verdict.limited && !shown.limited {
        Reply::Shadowed(shown, Some(b_shown + 1), call.unit)
    } else if verdict.limited {
        Reply::Binding(shown, b_shown + 1, call.unit)
    } else {
        Reply::Binding(verdict, b + 1, call.unit)
    })
}

/// Counts an error against every policy of the call.
fn count_error(call: &Call) {
    let mut registry = policy::registry();
    for l in &call.limiters {
        if l.policy.is_some() {
            registry.record(l.policy, Outcome::Error, None);
        }
    }
}

/// The most limiters one call takes. The call is linear in them (about
/// 3 µs each on Redis 7.0 here, more once the keys outgrow the caches) and
/// flagged `fast`: unbounded, one call of 160,000 keys blocked the server
/// for seconds. Real calls combine a few limits.
const MAX_KEYS: i64 = 100;

/// A parsed call.
struct Call<'a> {
    limiters: Vec<Named<'a>>,
    quantity: i64,
    unit: Unit,
    /// `SHADOW`: the call never refuses.
    shadow: bool,
}

/// A limiter of the call, and the policy it came from.
struct Named<'a> {
    limiter: Limiter,
    policy: Option<&'a [u8]>,
    /// The policy is in shadow mode.
    shadow: bool,
}

/// The number of keys, when `numkeys` is a positive integer and that many
/// keys follow it (with room for at least as many words after them).
fn numkeys(args: &Args) -> Result<usize, CmdError> {
    let n = cell_core::parse::integer(args.word(1)).ok();
    if n.is_some_and(|n| n > MAX_KEYS) {
        return Err(error::TOO_MANY_KEYS);
    }
    let n = n
        .and_then(|n| usize::try_from(n).ok())
        .filter(|&n| n >= 1 && n <= args.len().saturating_sub(2) / 2)
        .ok_or(error::BAD_NUMKEYS)?;
    Ok(n)
}

fn parse<'a>(args: &Args<'a>) -> Result<Call<'a>, CmdError> {
    let n = numkeys(args)?;
    // A set, not pairwise comparison: any client may send tens of
    // thousands of keys, and the check must stay linear.
    let mut seen = std::collections::HashSet::with_capacity(n);
    if !(0..n).all(|i| seen.insert(args.word(2 + i))) {
        return Err(error::KEY_TWICE);
    }
    let mut call = Call {
        limiters: Vec::with_capacity(n),
        quantity: 1,
        unit: Unit::Seconds,
        shadow: false,
    };
    let mut at = 2 + n;
    for i in 0..n {
        at = parse_limiter(args, at, i + 1 == n, &mut call)?;
    }
    if args.bytes(at).is_some() {
        return Err(error::LIMITER_COUNT);
    }
    Ok(call)
}

/// `POLICY name`, in place of a limiter.
fn is_policy(word: &[u8]) -> bool {
    word.eq_ignore_ascii_case(b"POLICY")
}

/// A word that starts a limiter.
fn starts_limiter(word: &[u8]) -> bool {
    limiter::kind_of(word).is_some() || is_policy(word)
}

/// The call's own options, which follow the last limiter.
fn is_call_option(word: &[u8]) -> bool {
    CALL.iter().any(|opt| match opt {
        Opt::Flag(name) | Opt::Keyword(name) | Opt::Quantity(Some(name)) => {
            word.eq_ignore_ascii_case(name.as_bytes())
        }
        Opt::Quantity(None) => false,
    })
}

/// The call's options, read with the last limiter's own.
const CALL: &[Opt] = &[
    Opt::Quantity(Some("QUANTITY")),
    Opt::Flag("MS"),
    Opt::Flag("SHADOW"),
];

/// One limiter at word `at`, with its options (and the call's, when it is
/// the last); answers where the next limiter starts.
fn parse_limiter<'a>(
    args: &Args<'a>,
    at: usize,
    last: bool,
    call: &mut Call<'a>,
) -> Result<usize, CmdError> {
    let word = args.bytes(at).ok_or(error::LIMITER_COUNT)?;
    let extra: &[Opt] = if last { CALL } else { &[] };
    let stop = |w: &[u8]| starts_limiter(w) || !last && is_call_option(w);
    let words = |i: usize| args.bytes(i);
    let (named, options, own, next) = if is_policy(word) {
        let name = args.bytes(at + 1).ok_or(error::LIMITER_COUNT)?;
        let (options, next) = options::read(extra, words, at + 2, stop)?;
        let (limiter, shadow) = policy::registry().lookup(name)?;
        let named = Named {
            limiter,
            policy: Some(name),
            shadow,
        };
        (named, options, 0, next)
    } else {
        let kind = limiter::kind_of(word).ok_or_else(|| {
            if is_call_option(word) {
                error::LIMITER_COUNT
            } else {
                error::UNKNOWN_LIMITER
            }
        })?;
        let read = limiter::read(&words, kind, at + 1, extra, &stop, error::LIMITER_COUNT)?;
        let named = Named {
            limiter: read.limiter,
            policy: None,
            shadow: false,
        };
        (named, read.options, read.own, read.next)
    };
    call.limiters.push(named);
    if last {
        call.quantity = options.quantity.unwrap_or(1);
        if options.has(own + 1) {
            call.unit = Unit::Millis;
        }
        call.shadow = options.has(own + 2);
    }
    Ok(next)
}

fn is_keys_position_request(ctx: &Context) -> bool {
    // SAFETY: a plain query of the live context.
    api!(RedisModule_IsKeysPositionRequest).is_some_and(|f| unsafe { f(ctx.ctx) } != 0)
}

/// Answers a server that asks where the keys are (servers without key
/// specs, and for arguments the key specs cannot describe).
fn report_keys(ctx: &Context, args: &Args) {
    let (Ok(n), Some(key_at)) = (numkeys(args), api!(RedisModule_KeyAtPos)) else {
        return;
    };
    for i in 0..n {
        // SAFETY: a key-position request context and a position within
        // the arguments.
        unsafe { key_at(ctx.ctx, (2 + i) as std::os::raw::c_int) };
    }
}
