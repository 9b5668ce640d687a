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
use crate::limiter::{self, Limiter};
use crate::store::{Access, Key};
use cell_core::reply::{binding_of, Unit};
use redis_module::Context;

pub fn throttle_all(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    if is_keys_position_request(ctx) {
        report_keys(ctx, args);
        return Ok(Reply::KeysReported);
    }
    args.expect_len(6, usize::MAX)?;
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
    let mut cursor = Cursor { args, at: 2 + n };
    let mut limiters = Vec::with_capacity(n);
    for _ in 0..n {
        limiters.push(parse_limiter(&mut cursor)?);
    }
    let (mut q, mut ms) = (None, false);
    while let Some(word) = cursor.next() {
        if word.eq_ignore_ascii_case(b"MS") && !ms {
            ms = true;
        } else if word.eq_ignore_ascii_case(b"QUANTITY") && q.is_none() {
            q = Some(quantity(cursor.next().ok_or(error::SYNTAX)?)?);
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

/// The words of a call, read from the front.
struct Cursor<'c, 'a> {
    args: &'c Args<'a>,
    at: usize,
}

impl<'a> Cursor<'_, 'a> {
    fn next(&mut self) -> Option<&'a [u8]> {
        let word = self.args.bytes(self.at)?;
        self.at += 1;
        Some(word)
    }

    /// The next word if it is `keyword` (taken), else nothing (left).
    fn take(&mut self, keyword: &[u8]) -> bool {
        let found = self
            .args
            .bytes(self.at)
            .is_some_and(|w| w.eq_ignore_ascii_case(keyword));
        self.at += usize::from(found);
        found
    }

    fn left(&self) -> usize {
        self.args.len().saturating_sub(self.at)
    }
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

/// One limiter from the cursor.
fn parse_limiter(words: &mut Cursor) -> Result<Limiter, CmdError> {
    let word = words.next().ok_or(error::LIMITER_COUNT)?;
    let kind = kind(word).ok_or_else(|| {
        if word.eq_ignore_ascii_case(b"QUANTITY") || word.eq_ignore_ascii_case(b"MS") {
            error::LIMITER_COUNT
        } else {
            error::UNKNOWN_LIMITER
        }
    })?;
    let params = if kind == Kind::Gcra { 3 } else { 2 };
    if words.left() < params {
        return Err(error::LIMITER_COUNT);
    }
    let mut p = [&[][..]; 3];
    for slot in p.iter_mut().take(params) {
        *slot = words.next().unwrap_or_default();
    }
    Ok(match kind {
        Kind::Gcra => Limiter::Gcra(limiter::gcra(p[0], p[1], p[2])?),
        Kind::Sliding => {
            let approx = words.take(b"APPROX");
            limiter::sliding(p[0], p[1], approx)?
        }
        Kind::Fixed => {
            let tz = if words.take(b"TZ") {
                Some(words.next().ok_or(error::BAD_TZ)?)
            } else {
                None
            };
            let align = words.take(b"ALIGN");
            limiter::fixed(p[0], p[1], tz, align)?
        }
    })
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
