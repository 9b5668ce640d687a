//! `CL.THROTTLEALL numkeys key [key ...] limiter [limiter ...] [QUANTITY q] [MS]`
//! with `limiter := GCRA max_burst count_per_period period
//!                | SW limit window [APPROX]
//!                | FW limit window-or-unit [ALIGN] [TZ zone]`:
//! several limits in one atomic, all-or-nothing call. Each limiter's
//! options come in any order after its parameters; the call's own after
//! the last limiter's, mixed with that limiter's.
//!
//! Every limiter decides at the same instant exactly as its own command
//! would for quantity `q` on its key. Only if all of them allow is every
//! key written, as its own command would write it; otherwise nothing is
//! (but for what a single command also writes when refused). The reply is
//! the binding limiter's five integers and its 1-based index.

use crate::args::Args;
use crate::clock;
use crate::error::{self, CmdError};
use crate::handler::Reply;
use crate::limiter::{self, Limiter};
use crate::store::{Access, Key};
use cell_core::options::Opt;
use cell_core::reply::{binding_of, Unit};
use redis_module::Context;

pub fn throttle_all(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    if is_keys_position_request(ctx) {
        report_keys(ctx, args);
        return Ok(Reply::KeysReported);
    }
    args.require(6)?;
    let call = parse(args)?;
    // One instant for all; every state is read (and every type checked)
    // before anything is written.
    let now = clock::now_nanos();
    let mut keys = Vec::with_capacity(call.limiters.len());
    for (i, limiter) in call.limiters.iter().enumerate() {
        let name = args.raw(2 + i).ok_or(CmdError::WrongArity)?;
        let mut key = Key::open(ctx, name, Access::Write);
        let decided = limiter.decide(&mut key, now, call.quantity)?;
        keys.push((key, decided));
    }
    let (b, verdict) = binding_of(keys.iter().map(|(_, d)| d.verdict)).ok_or(error::INTERNAL)?;
    for (key, decided) in keys.iter_mut() {
        decided.apply(key, !verdict.limited)?;
    }
    Ok(Reply::Binding(verdict, b + 1, call.unit))
}

/// The most limiters one call takes. The call is linear in them (about
/// 3 µs each on Redis 7.0 here, more once the keys outgrow the caches) and
/// flagged `fast`: unbounded, one call of 160,000 keys blocked the server
/// for seconds. Real calls combine a few limits.
const MAX_KEYS: i64 = 100;

/// A parsed call.
struct Call {
    limiters: Vec<Limiter>,
    quantity: i64,
    unit: Unit,
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

fn parse(args: &Args) -> Result<Call, CmdError> {
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

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Gcra,
    Sliding,
    Fixed,
}

fn kind_of(word: &[u8]) -> Option<Kind> {
    [
        (b"GCRA" as &[u8], Kind::Gcra),
        (b"SW", Kind::Sliding),
        (b"FW", Kind::Fixed),
    ]
    .into_iter()
    .find_map(|(name, kind)| word.eq_ignore_ascii_case(name).then_some(kind))
}

/// The call's own options, which follow the last limiter.
fn is_call_option(word: &[u8]) -> bool {
    word.eq_ignore_ascii_case(b"QUANTITY") || word.eq_ignore_ascii_case(b"MS")
}

/// Each kind's options; the last limiter's are followed by the call's
/// (`QUANTITY q`, `MS`), at the two positions after its own.
const GCRA: &[Opt] = &[Opt::Quantity(Some("QUANTITY")), Opt::Flag("MS")];
const SW: &[Opt] = &[
    Opt::Flag("APPROX"),
    Opt::Quantity(Some("QUANTITY")),
    Opt::Flag("MS"),
];
const FW: &[Opt] = &[
    Opt::Flag("ALIGN"),
    Opt::Keyword("TZ"),
    Opt::Quantity(Some("QUANTITY")),
    Opt::Flag("MS"),
];

/// One limiter at word `at`, with its options (and the call's, when it is
/// the last); answers where the next limiter starts.
fn parse_limiter(args: &Args, at: usize, last: bool, call: &mut Call) -> Result<usize, CmdError> {
    let word = args.bytes(at).ok_or(error::LIMITER_COUNT)?;
    let kind = kind_of(word).ok_or_else(|| {
        if is_call_option(word) {
            error::LIMITER_COUNT
        } else {
            error::UNKNOWN_LIMITER
        }
    })?;
    let (params, spec) = match kind {
        Kind::Gcra => (3, GCRA),
        Kind::Sliding => (2, SW),
        Kind::Fixed => (2, FW),
    };
    if args.len() < at + 1 + params {
        return Err(error::LIMITER_COUNT);
    }
    let p = |i: usize| args.word(at + 1 + i);
    let own = spec.len() - 2;
    let spec = if last { spec } else { &spec[..own] };
    let stop = |w: &[u8]| kind_of(w).is_some() || !last && is_call_option(w);
    let (options, next) = args.options_until(at + 1 + params, spec, stop)?;
    call.limiters.push(match kind {
        Kind::Gcra => Limiter::Gcra(limiter::gcra(p(0), p(1), p(2))?),
        Kind::Sliding => limiter::sliding(p(0), p(1), options.has(0))?,
        Kind::Fixed => limiter::fixed(p(0), p(1), options.value(1), options.has(0))?,
    });
    if last {
        call.quantity = options.quantity.unwrap_or(1);
        if options.has(own + 1) {
            call.unit = Unit::Millis;
        }
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
