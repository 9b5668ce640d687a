//! `CL.THROTTLEALL numkeys key [key ...] limiter [limiter ...] [QUANTITY q] [MS] [SHADOW]`
//! with `limiter := GCRA max_burst count_per_period period
//!                | SW limit window [APPROX]
//!                | FW limit window-or-unit [ALIGN] [TZ zone]
//!                | POLICY name`:
//! several limits in one atomic, all-or-nothing call. Each limiter's
//! options come in any order after its parameters; the call's own after
//! the last limiter's, mixed with that limiter's.
//!
//! Every limiter that enforces decides at the same instant exactly as its
//! own command would for quantity `q` on its key. Only if all of them
//! allow is every such key written, as its own command would write it;
//! otherwise none is (but for what a single command also writes when
//! refused). The reply is the binding enforcing limiter's five integers
//! and its 1-based position in the call.
//!
//! A limiter in shadow mode (one from a policy set with `SHADOW`) and a
//! policy's trial never change what the enforcing limiters decide, write,
//! count or answer: each decides apart, as if it were enforced alone in a
//! call of its own at the same instant with the same quantity, writes what
//! that call would write, and counts (and records for `CL.TOP`) a refusal
//! as a shadow one. A call with no enforcing limiter answers its shadow
//! limiters' binding one, a refusal answered as allowed. The call's
//! `SHADOW` leaves every decision and write as without it, and answers a
//! refusal as allowed.

use super::trial;
use crate::args::Args;
use crate::clock;
use crate::error::{self, CmdError};
use crate::few::Few;
use crate::handler::Reply;
use crate::limiter::{self, Decided, Limiter};
use crate::policies::{self, Refusal};
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
    // Parsed in place: the call is large, and moving it costs.
    let mut call = Call {
        limiters: Few::new(),
        quantity: 1,
        unit: Unit::Seconds,
        shadow: false,
        trials: false,
    };
    parse(args, &mut call)?;
    // One instant for all; every state is read (and every type checked)
    // before anything is written.
    let now = clock::now_nanos();
    let mut keys: Slots = Few::new();
    for (i, limiter) in call.limiters.iter().enumerate() {
        let name = args.raw(2 + i).ok_or(CmdError::WrongArity)?;
        let mut key = Key::open(ctx, name, Access::Write);
        let decided = limiter.limiter.decide(&mut key, now, call.quantity);
        // A shadow limiter's error is its own; an enforcing one's fails the
        // call before anything is written.
        if let (Err(e), false) = (&decided, limiter.shadow) {
            count_error(&call);
            return Err(*e);
        }
        keys.push((key, decided));
    }
    let decided = || {
        call.limiters
            .iter()
            .zip(keys.iter())
            .enumerate()
            .filter_map(|(i, (l, (_, d)))| Some((i, l.shadow, d.as_ref().ok()?.verdict)))
    };
    let enforcing = || decided().filter(|(_, shadow, _)| !shadow);
    let binding = match binding_of(enforcing().map(|(_, _, v)| v)) {
        Some((b, v)) => Some((enforcing().nth(b).map_or(0, |(i, _, _)| i), v, false)),
        None => binding_of(decided().map(|(_, _, v)| v))
            .map(|(b, v)| (decided().nth(b).map_or(0, |(i, _, _)| i), v, true)),
    };
    // Every limiter is a shadow one, and each failed: the first error.
    let Some((b, verdict, all_shadow)) = binding else {
        count_error(&call);
        let first = keys.iter().find_map(|(_, d)| d.as_ref().err().copied());
        return Err(first.unwrap_or(error::INTERNAL));
    };
    let goes_ahead = all_shadow || !verdict.limited;
    for (limiter, (key, decided)) in call.limiters.iter().zip(keys.iter_mut()) {
        if let Ok(d) = decided {
            let goes = if limiter.shadow {
                !d.verdict.limited
            } else {
                goes_ahead
            };
            d.apply(key, goes)?;
        }
    }
    record(args, &call, &keys);
    drop(keys);
    if call.trials {
        let n = call.limiters.len();
        let taken = |name: &[u8]| (0..n).any(|i| args.word(2 + i) == name);
        for (i, limiter) in call.limiters.iter().enumerate() {
            if let (Some(t), Some(p)) = (&limiter.trial, limiter.policy) {
                trial::run(ctx, p, args.word(2 + i), t, now, call.quantity, &taken);
            }
        }
    }
    let shown = Verdict {
        limited: false,
        retry_after: None,
        ..verdict
    };
    Ok(if verdict.limited && (all_shadow || call.shadow) {
        Reply::Shadowed(shown, Some(b + 1), call.unit)
    } else {
        Reply::Binding(verdict, b + 1, call.unit)
    })
}

/// Counts each policy's decision and records each refusal for `CL.TOP`:
/// an enforcing limiter's as refused (shadow with the call's `SHADOW`), a
/// shadow one's as a shadow refusal.
fn record(args: &Args, call: &Call, keys: &Slots) {
    let needed = call
        .limiters
        .iter()
        .zip(keys.iter())
        .any(|(l, (_, d))| l.policy.is_some() || d.as_ref().is_ok_and(|d| d.verdict.limited));
    if !needed {
        return;
    }
    let mut registry = policies::registry();
    for (i, (limiter, (_, decided))) in call.limiters.iter().zip(keys.iter()).enumerate() {
        let shadow = call.shadow || limiter.shadow;
        let (outcome, refused) = match decided {
            Err(_) => (Outcome::Error, false),
            Ok(d) if !d.verdict.limited => (Outcome::Allowed, false),
            Ok(_) if shadow => (Outcome::ShadowRefused, true),
            Ok(_) => (Outcome::Refused, true),
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

/// Counts an error against every policy of the call.
fn count_error(call: &Call) {
    let mut registry = policies::registry();
    for l in call.limiters.iter() {
        if l.policy.is_some() {
            registry.record(l.policy, Outcome::Error, None);
        }
    }
}

/// Limiters kept without a heap allocation: real calls combine a few.
const INLINE: usize = 4;

/// Each limiter's key and what it decided, in the call's order.
type Slots = Few<(Key, Result<Decided, CmdError>), INLINE>;

/// The most limiters one call takes. The call is linear in them (about
/// 3 µs each on Redis 7.0 here, more once the keys outgrow the caches) and
/// flagged `fast`: unbounded, one call of 160,000 keys blocked the server
/// for seconds. Real calls combine a few limits.
const MAX_KEYS: i64 = 100;

/// A parsed call.
struct Call<'a> {
    limiters: Few<Named<'a>, INLINE>,
    quantity: i64,
    unit: Unit,
    /// `SHADOW`: the call never refuses.
    shadow: bool,
    /// Some policy of the call has a trial.
    trials: bool,
}

/// A limiter of the call, and the policy it came from.
struct Named<'a> {
    limiter: Limiter,
    policy: Option<&'a [u8]>,
    /// The policy is in shadow mode.
    shadow: bool,
    /// The policy's trial.
    trial: Option<Box<Limiter>>,
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

fn parse<'a>(args: &Args<'a>, call: &mut Call<'a>) -> Result<(), CmdError> {
    let n = numkeys(args)?;
    if named_twice(args, n) {
        return Err(error::KEY_TWICE);
    }
    if parsed::reuse(args, n, call) {
        return Ok(());
    }
    let mut at = 2 + n;
    for i in 0..n {
        at = parse_limiter(args, at, i + 1 == n, call)?;
    }
    if args.bytes(at).is_some() {
        return Err(error::LIMITER_COUNT);
    }
    parsed::keep(args, n, call);
    Ok(())
}

/// The calls parsed last, kept by their words: a client sends the same
/// limiters with every request, and reading them again (numbers,
/// durations, options) costs more than comparing the words. Only calls
/// whose every limiter is given as arguments are kept (a policy is looked
/// up at each call, as it may change), and none with `TZ` (a named zone's
/// rules are looked up again after a while, `crate::zones`). Per thread,
/// as the server runs commands on one.
mod parsed {
    use super::{Call, Named};
    use crate::args::Args;
    use crate::limiter::Limiter;
    use cell_core::reply::Unit;
    use std::cell::RefCell;

    /// Calls kept, the oldest replaced first.
    const ENTRIES: usize = 4;
    /// Words of a call longer than this are not kept.
    const MAX_BYTES: usize = 512;

    struct Entry {
        n: usize,
        /// The words after the keys, each preceded by its length.
        words: Vec<u8>,
        limiters: Vec<Limiter>,
        quantity: i64,
        unit: Unit,
        shadow: bool,
    }

    struct Kept {
        entries: Vec<Entry>,
        next: usize,
    }

    thread_local! {
        static KEPT: RefCell<Kept> = const {
            RefCell::new(Kept {
                entries: Vec::new(),
                next: 0,
            })
        };
    }

    /// Whether the words from `from` on are `entry`'s.
    fn same(entry: &Entry, args: &Args, from: usize) -> bool {
        let mut rest = entry.words.as_slice();
        for i in from..args.len() {
            let word = args.word(i);
            let Some((&len, tail)) = rest.split_first() else {
                return false;
            };
            if usize::from(len) != word.len() || tail.get(..word.len()) != Some(word) {
                return false;
            }
            rest = tail.get(word.len()..).unwrap_or_default();
        }
        rest.is_empty()
    }

    /// Fills `call` from a kept call with these words, if there is one.
    pub fn reuse(args: &Args, n: usize, call: &mut Call) -> bool {
        KEPT.with(|kept| {
            let kept = kept.borrow();
            let Some(e) = kept
                .entries
                .iter()
                .find(|e| e.n == n && same(e, args, 2 + n))
            else {
                return false;
            };
            for limiter in &e.limiters {
                call.limiters.push(Named {
                    limiter: limiter.clone(),
                    policy: None,
                    shadow: false,
                    trial: None,
                });
            }
            call.quantity = e.quantity;
            call.unit = e.unit;
            call.shadow = e.shadow;
            true
        })
    }

    /// Keeps a call just parsed, if it may be.
    pub fn keep(args: &Args, n: usize, call: &Call) {
        if call.limiters.iter().any(|l| l.policy.is_some()) {
            return;
        }
        let mut words = Vec::new();
        for i in 2 + n..args.len() {
            let word = args.word(i);
            if word.eq_ignore_ascii_case(b"TZ") || word.len() > usize::from(u8::MAX) {
                return;
            }
            words.push(word.len() as u8);
            words.extend_from_slice(word);
            if words.len() > MAX_BYTES {
                return;
            }
        }
        let entry = Entry {
            n,
            words,
            limiters: call.limiters.iter().map(|l| l.limiter.clone()).collect(),
            quantity: call.quantity,
            unit: call.unit,
            shadow: call.shadow,
        };
        KEPT.with(|kept| {
            let mut kept = kept.borrow_mut();
            let at = kept.next;
            kept.next = (at + 1) % ENTRIES;
            match kept.entries.get_mut(at) {
                Some(slot) => *slot = entry,
                None => kept.entries.push(entry),
            }
        });
    }
}

/// Whether one of the `n` keys is named twice: pairwise for a few (no
/// allocation, no hashing), by a set for more (any client may send a
/// hundred keys, and the check must stay linear).
fn named_twice(args: &Args, n: usize) -> bool {
    const PAIRWISE: usize = 8;
    let key = |i: usize| args.word(2 + i);
    if n <= PAIRWISE {
        return (1..n).any(|i| (0..i).any(|j| key(j) == key(i)));
    }
    let mut seen = std::collections::HashSet::with_capacity(n);
    !(0..n).all(|i| seen.insert(key(i)))
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
    CALL.iter().any(|opt| opt.is_named(word))
}

/// The call's options, read with the last limiter's own.
const CALL: &[Opt] = &[options::NAMED_QUANTITY, options::MS, options::SHADOW];

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
    let (named, found, next) = if is_policy(word) {
        let name = args.bytes(at + 1).ok_or(error::LIMITER_COUNT)?;
        let (options, next) = options::read(extra, &[], words, at + 2, stop)?;
        let found = policies::registry().lookup(name)?;
        call.trials |= found.trial.is_some();
        let named = Named {
            limiter: found.limiter,
            policy: Some(name),
            shadow: found.shadow,
            trial: found.trial.map(Box::new),
        };
        (named, options, next)
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
            trial: None,
        };
        (named, read.options, read.next)
    };
    call.limiters.push(named);
    if last {
        call.quantity = found.quantity.unwrap_or(1);
        if found.has(options::MS) {
            call.unit = Unit::Millis;
        }
        call.shadow = found.has(options::SHADOW);
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

command! {
    CL_THROTTLEALL: "cl.throttleall" => throttle_all,
    flags: "write deny-oom fast getkeys-api",
    keys: Counted, key_use: ReadUpdate, role: Public,
    docs: Docs {
        summary: "Several limits in one atomic, all-or-nothing call: each limiter (GCRA, SW or FW, with the parameters of CL.THROTTLE, SW.ALLOW or FW.INCR) decides for its key; all keys are written only if all allow. Answers the binding limiter's [limited, limit, remaining, retry_after, reset_after] and its 1-based index.",
        complexity: "O(N) in the limiters (at most 100), each as its own command",
        arity: -5,
        args: &[
            arg("numkeys", Integer),
            multiple("key", Key),
            multiple(
                "limiter",
                OneOf(&[
                    block("GCRA", &[GCRA_LIMITER]),
                    block("SW", &[SW_LIMITER, flag("APPROX")]),
                    block("FW", &[FW_LIMITER]),
                    block("POLICY", &[arg("name", ArgKind::String)]),
                ]),
            ),
            keyword("QUANTITY", "q", Integer),
            flag("MS"),
            flag("SHADOW"),
        ],
    },
}
