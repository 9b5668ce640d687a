//! `CL.THROTTLEALL numkeys key [key ...] limiter [limiter ...] [QUANTITY q] [MS]`
//! with `limiter := GCRA max_burst count_per_period period
//!                | SW limit window [APPROX]
//!                | FW limit window [ALIGN] | FW limit unit [TZ ±hh:mm]`:
//! several limits in one atomic, all-or-nothing call.
//!
//! Every limiter decides at the same instant exactly as its own command
//! would for quantity `q` on its key. Only if all of them allow is every
//! key written, as its own command would write it; otherwise nothing is
//! (but for what a single command also writes when refused). The reply is
//! the binding limiter's five integers and its 1-based index.

use crate::args::{quantity, Args};
use crate::clock;
use crate::error::{self, CmdError};
use crate::handler::Reply;
use crate::limiter::{self, Decided, Limiter};
use crate::store::{Access, Key};
use cell_core::reply::{binding, Unit, Verdict};
use redis_module::Context;

pub fn throttle_all(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    if is_keys_position_request(ctx) {
        report_keys(ctx, args);
        return Ok(Reply::KeysReported);
    }
    args.expect_len(6, usize::MAX)?;
    let call = parse(args)?;
    let mut keys = Vec::with_capacity(call.limiters.len());
    for i in 0..call.limiters.len() {
        let name = args.raw(2 + i).ok_or(CmdError::WrongArity)?;
        keys.push(Key::open(ctx, name, Access::Write));
    }
    // One instant for all; every state is read (and every type checked)
    // before anything is written.
    let now = clock::now_nanos();
    let decided: Vec<Decided> = call
        .limiters
        .iter()
        .zip(keys.iter_mut())
        .map(|(limiter, key)| limiter.decide(key, now, call.quantity))
        .collect::<Result<_, _>>()?;
    let verdicts: Vec<Verdict> = decided.iter().map(|d| d.verdict).collect();
    let b = binding(&verdicts).ok_or(error::INTERNAL)?;
    let go_ahead = !verdicts[b].limited;
    for (d, key) in decided.iter().zip(keys.iter_mut()) {
        if go_ahead {
            d.apply(key)?;
        } else {
            d.apply_repair(key)?;
        }
    }
    Ok(Reply::Binding(verdicts[b], b + 1, call.unit))
}

/// A parsed call.
struct Call {
    limiters: Vec<Limiter>,
    quantity: i64,
    unit: Unit,
}

/// The number of keys, when `numkeys` is a positive integer and that many
/// keys follow it (with room for at least as many words after them).
fn numkeys(args: &Args) -> Result<usize, CmdError> {
    let n = cell_core::parse::integer(args.bytes(1).unwrap_or_default())
        .ok()
        .and_then(|n| usize::try_from(n).ok())
        .filter(|&n| n >= 1 && n <= args.len().saturating_sub(2) / 2)
        .ok_or(error::BAD_NUMKEYS)?;
    Ok(n)
}

fn parse(args: &Args) -> Result<Call, CmdError> {
    let n = numkeys(args)?;
    let words: Vec<&[u8]> = (2..args.len())
        .map(|i| args.bytes(i).unwrap_or_default())
        .collect();
    let (names, mut rest) = words.split_at(n);
    for (i, name) in names.iter().enumerate() {
        if names[..i].contains(name) {
            return Err(error::KEY_TWICE);
        }
    }
    let mut limiters = Vec::with_capacity(n);
    for _ in 0..n {
        let (limiter, after) = parse_limiter(rest)?;
        limiters.push(limiter);
        rest = after;
    }
    let (mut q, mut ms) = (None, false);
    while let Some((&word, after)) = rest.split_first() {
        rest = after;
        if word.eq_ignore_ascii_case(b"MS") && !ms {
            ms = true;
        } else if word.eq_ignore_ascii_case(b"QUANTITY") && q.is_none() {
            let (&value, after) = rest.split_first().ok_or(error::SYNTAX)?;
            q = Some(quantity(value)?);
            rest = after;
        } else if kind(word).is_some() {
            return Err(error::LIMITER_COUNT);
        } else {
            return Err(error::SYNTAX);
        }
    }
    Ok(Call {
        limiters,
        quantity: q.unwrap_or(1),
        unit: if ms { Unit::Millis } else { Unit::Seconds },
    })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Gcra,
    Sliding,
    Fixed,
}

fn kind(word: &[u8]) -> Option<Kind> {
    [
        (b"GCRA" as &[u8], Kind::Gcra),
        (b"SW", Kind::Sliding),
        (b"FW", Kind::Fixed),
    ]
    .into_iter()
    .find_map(|(name, kind)| word.eq_ignore_ascii_case(name).then_some(kind))
}

/// One limiter from the front of `words`, and the words after it.
fn parse_limiter<'w>(words: &'w [&'w [u8]]) -> Result<(Limiter, &'w [&'w [u8]]), CmdError> {
    let (&word, rest) = words.split_first().ok_or(error::LIMITER_COUNT)?;
    let kind = kind(word).ok_or_else(|| {
        if word.eq_ignore_ascii_case(b"QUANTITY") || word.eq_ignore_ascii_case(b"MS") {
            error::LIMITER_COUNT
        } else {
            error::UNKNOWN_LIMITER
        }
    })?;
    let params = if kind == Kind::Gcra { 3 } else { 2 };
    if rest.len() < params {
        return Err(error::LIMITER_COUNT);
    }
    let (p, mut rest) = rest.split_at(params);
    let flag = |name: &[u8], rest: &mut &'w [&'w [u8]]| match rest.split_first() {
        Some((w, after)) if w.eq_ignore_ascii_case(name) => {
            *rest = after;
            true
        }
        _ => false,
    };
    let limiter = match kind {
        Kind::Gcra => Limiter::Gcra(limiter::gcra(p[0], p[1], p[2])?),
        Kind::Sliding => {
            let approx = flag(b"APPROX", &mut rest);
            limiter::sliding(p[0], p[1], approx)?
        }
        Kind::Fixed => {
            let tz = match rest.split_first() {
                Some((w, after)) if limiter::is_tz(Some(w)) => {
                    let (&offset, after) = after.split_first().ok_or(error::BAD_TZ)?;
                    rest = after;
                    Some(offset)
                }
                _ => None,
            };
            let align = flag(b"ALIGN", &mut rest);
            limiter::fixed(p[0], p[1], tz, align)?
        }
    };
    Ok((limiter, rest))
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
