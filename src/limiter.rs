//! The limiters as the commands use them: parameters parsed from words,
//! a decision read from a key, and the write that follows when the call
//! goes ahead. Single commands and `CL.THROTTLEALL` share all of it, so a
//! limiter inside `CL.THROTTLEALL` decides and writes exactly as its own
//! command does.

use crate::error::{self, CmdError};
use crate::store::Key;
use crate::types::WINDOW_TYPE;
use crate::zones;
use cell_core::calendar::{self, Unit};
use cell_core::fixed::{Counter, Effect, FixedWindow};
use cell_core::gcra::{self, Gcra};
use cell_core::options::{self, Found, Opt};
use cell_core::parse;
use cell_core::reply::Verdict;
use cell_core::sliding::{self, Log, SlidingWindow};
use cell_core::sliding_approx::{self, ApproxWindow};
use cell_core::window_state::WindowState;
use redis_module::raw;
use std::ffi::CStr;

/// One limit on one key.
#[derive(Clone, Debug)]
pub enum Limiter {
    Gcra(Gcra),
    Exact(SlidingWindow),
    Approx(ApproxWindow),
    Fixed(FixedWindow),
}

/// What a limiter decided, and what to write.
pub struct Decided {
    pub verdict: Verdict,
    /// Written when the call goes ahead.
    pub write: Write,
    /// Written even when the call is refused: the end of its window for a
    /// fixed-window counter found without a TTL, which would otherwise
    /// block its user forever.
    pub repair: Option<i64>,
    /// Whether `write` is written even when the call is refused: a
    /// `COUNTALL` fixed window counts every hit.
    pub always: bool,
}

/// A write, with everything needed to replicate it as an effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Write {
    None,
    /// `CL.THROTTLE`: store the TAT, expiring when the bucket is full.
    Tat {
        tat: i64,
        expire_at_ms: i64,
    },
    /// `SW.ALLOW`: record a request at `at`.
    Record {
        window: i64,
        at: i64,
        quantity: i64,
        approx: bool,
    },
    /// `FW.INCR`: store the count, expiring at the end of its window
    /// (`current` is the expiry found, not rewritten when unchanged).
    Count {
        count: i64,
        expire_at_ms: i64,
        current: Option<i64>,
    },
}

/// `max_burst count_per_period period`, validated as `CL.THROTTLE` does.
pub fn gcra(max_burst: &[u8], count: &[u8], period: &[u8]) -> Result<Gcra, CmdError> {
    let max_burst = parse::integer(max_burst)?;
    let count = parse::integer(count)?;
    let period = error::duration(period, error::BAD_PERIOD)?;
    if max_burst < 0 {
        return Err(error::NEGATIVE_MAX_BURST);
    }
    if count < 1 {
        return Err(error::COUNT_NOT_POSITIVE);
    }
    if period < 1 {
        return Err(error::PERIOD_NOT_POSITIVE);
    }
    Ok(Gcra::new(max_burst, count, period)?)
}

/// `limit window`, validated as `SW.ALLOW` does.
pub fn sliding(limit: &[u8], window: &[u8], approx: bool) -> Result<Limiter, CmdError> {
    let (limit, window) = (self::limit(limit)?, self::window(window)?);
    Ok(if approx {
        Limiter::Approx(ApproxWindow::new(limit, window)?)
    } else {
        Limiter::Exact(SlidingWindow::new(limit, window)?)
    })
}

/// `limit window [ALIGN]` or `limit unit [TZ zone]`, and `COUNTALL`
/// (every hit counted), validated as `FW.INCR` does: a calendar unit (`minute` ... `year`) in place of the
/// window makes calendar windows in the zone `tz`, a fixed offset
/// (`+09:00`) or an IANA name (`Europe/Berlin`), UTC without it; they are
/// aligned by nature, so ALIGN changes nothing for them.
pub fn fixed(
    limit: &[u8],
    window: &[u8],
    tz: Option<&[u8]>,
    align: bool,
    countall: bool,
) -> Result<Limiter, CmdError> {
    let limit = self::limit(limit)?;
    let fw = match Unit::parse(window) {
        Some(unit) => match tz {
            None => FixedWindow::calendar(limit, unit, 0)?,
            Some(word) => match calendar::parse_offset(word) {
                Some(offset) => FixedWindow::calendar(limit, unit, offset)?,
                None => FixedWindow::zoned(limit, unit, zones::find(word).ok_or(error::BAD_TZ)?)?,
            },
        },
        None if tz.is_some() => return Err(error::TZ_WITHOUT_CALENDAR),
        None => FixedWindow::new(limit, self::window(window)?, align)?,
    };
    Ok(Limiter::Fixed(fw.counting(countall)))
}

/// A non-negative integer limit.
pub fn limit(word: &[u8]) -> Result<i64, CmdError> {
    match parse::integer(word)? {
        l if l < 0 => Err(error::NEGATIVE_LIMIT),
        l => Ok(l),
    }
}

/// A positive window, in nanoseconds.
pub fn window(word: &[u8]) -> Result<i64, CmdError> {
    match error::duration(word, error::BAD_WINDOW)? {
        w if w < 1 => Err(error::WINDOW_NOT_POSITIVE),
        w => Ok(w),
    }
}

impl Limiter {
    /// The error every limiter answers, before reading or writing anything,
    /// for a call at `now` whose arithmetic would pass the end of 64-bit
    /// nanoseconds (2262; see `cell_core::within_64_bits`).
    pub fn check(&self, now: i64) -> Result<(), CmdError> {
        Ok(match self {
            Limiter::Gcra(g) => g.check(now),
            Limiter::Exact(sw) => sw.check(now),
            Limiter::Approx(a) => a.check(now),
            Limiter::Fixed(fw) => fw.check(now),
        }?)
    }

    /// Decides a request of `quantity` at `now` on `key`, reading its state
    /// (WRONGTYPE or an `ERR` for state of another kind) and writing
    /// nothing.
    #[inline]
    pub fn decide(&self, key: &mut Key, now: i64, quantity: i64) -> Result<Decided, CmdError> {
        self.check(now)?;
        let nothing = |verdict| Decided::plain(verdict, Write::None);
        match self {
            Limiter::Gcra(g) => {
                let tat = key.integer(error::INVALID_TAT)?;
                let (decision, verdict) = g.decide(tat, now, quantity)?;
                Ok(match decision {
                    gcra::Decision::Allowed { tat, expire_at_ms } => {
                        Decided::plain(verdict, Write::Tat { tat, expire_at_ms })
                    }
                    _ => nothing(verdict),
                })
            }
            Limiter::Exact(sw) => {
                let (decision, verdict) = match window_state(key, false)? {
                    Some(WindowState::Exact { log, .. }) => sw.decide(log, now, quantity),
                    _ => sw.decide(&Log::new(), now, quantity),
                };
                Ok(exact_decided(sw, decision, verdict, quantity))
            }
            Limiter::Approx(a) => {
                let state = match window_state(key, true)? {
                    Some(WindowState::Approx(c)) => Some(*c),
                    _ => None,
                };
                let (decision, verdict) = a.decide(state, now, quantity);
                Ok(approx_decided(a, decision, verdict, now, quantity))
            }
            Limiter::Fixed(fw) => {
                let found = counter(key)?;
                let outcome = fw.decide(found, now, quantity);
                let current = found.and_then(|c| c.expire_at_ms);
                let write = match outcome.effect {
                    Effect::None => Write::None,
                    Effect::Store {
                        count,
                        expire_at_ms,
                    } => Write::Count {
                        count,
                        expire_at_ms,
                        current,
                    },
                };
                Ok(Decided {
                    verdict: outcome.verdict,
                    write,
                    repair: outcome.repair,
                    always: fw.counts_all(),
                })
            }
        }
    }
}

/// What the exact log decided, as a [`Decided`]: an admission with a
/// quantity above 0 records it.
fn exact_decided(
    sw: &SlidingWindow,
    decision: sliding::Decision,
    verdict: Verdict,
    quantity: i64,
) -> Decided {
    let write = match decision {
        sliding::Decision::Allowed {
            record_at: Some(at),
        } => Write::Record {
            window: sw.window(),
            at,
            quantity,
            approx: false,
        },
        _ => Write::None,
    };
    Decided::plain(verdict, write)
}

impl Limiter {
    /// Decides a request of `quantity` at `now` on `key` and writes what
    /// the call writes: [`Limiter::decide`], then [`Decided::apply`].
    /// The outer error is one of deciding (nothing was written), the inner
    /// one of writing.
    #[inline]
    pub fn enforce(
        &self,
        key: &mut Key,
        now: i64,
        quantity: i64,
    ) -> Result<Result<Verdict, CmdError>, CmdError> {
        match self {
            Limiter::Exact(sw) => return allow_exact(key, sw, now, quantity),
            Limiter::Approx(a) => return allow_approx(key, a, now, quantity),
            _ => {}
        }
        Ok(self.decide(key, now, quantity)?.applied(key))
    }
}

/// [`Limiter::enforce`] of the exact log: an admission that drops nothing
/// from the log (the common case) is decided and recorded in one pass over
/// the key's state, then written as [`record`] writes it (`sw.allow`, the
/// expiry, `SW.RECORD`); any other call is decided, then applied.
fn allow_exact(
    key: &mut Key,
    sw: &SlidingWindow,
    now: i64,
    quantity: i64,
) -> Result<Result<Verdict, CmdError>, CmdError> {
    sw.check(now)?;
    let (decision, verdict) = match window_state(key, false)? {
        Some(WindowState::Exact { log, window }) => match sw.allow(log, now, quantity) {
            sliding::Allow::Decided(decision, verdict) => (decision, verdict),
            sliding::Allow::Recorded { verdict, at } => {
                *window = Some(sw.window());
                let expire = sliding::expire_at_ms(log, sw.window());
                let written = window_written(key, c"sw.allow", expire).map(|()| {
                    replicate_window_effect(key, c"SW.RECORD", sw.window(), at, quantity, false);
                    verdict
                });
                return Ok(written);
            }
        },
        _ => sw.decide(&Log::new(), now, quantity),
    };
    Ok(exact_decided(sw, decision, verdict, quantity).applied(key))
}

/// [`Limiter::enforce`] of the sliding window counter: an admission on a
/// key that holds a counter stores the counter the decision made (what
/// [`record`] would work out again from the key's state) and is written as
/// [`record`] writes it; any other call is decided, then applied.
fn allow_approx(
    key: &mut Key,
    a: &ApproxWindow,
    now: i64,
    quantity: i64,
) -> Result<Result<Verdict, CmdError>, CmdError> {
    a.check(now)?;
    let Some(state) = window_state(key, true)? else {
        let (decision, verdict) = a.decide(None, now, quantity);
        return Ok(approx_decided(a, decision, verdict, now, quantity).applied(key));
    };
    let WindowState::Approx(c) = state else {
        return Err(error::EXACT_KEY);
    };
    let (decision, verdict) = a.decide(Some(*c), now, quantity);
    let sliding_approx::Decision::Allowed {
        counter: Some(next),
    } = decision
    else {
        return Ok(approx_decided(a, decision, verdict, now, quantity).applied(key));
    };
    *c = next;
    let expire = state.expire_at_ms();
    Ok(window_written(key, c"sw.allow", expire).map(|()| {
        replicate_window_effect(key, c"SW.RECORD", a.window(), now, quantity, true);
        verdict
    }))
}

/// What the sliding window counter decided, as a [`Decided`]: an
/// admission with a quantity above 0 records it at `now`.
fn approx_decided(
    a: &ApproxWindow,
    decision: sliding_approx::Decision,
    verdict: Verdict,
    now: i64,
    quantity: i64,
) -> Decided {
    let write = match decision {
        sliding_approx::Decision::Allowed { counter: Some(_) } => Write::Record {
            window: a.window(),
            at: now,
            quantity,
            approx: true,
        },
        _ => Write::None,
    };
    Decided::plain(verdict, write)
}

impl Limiter {
    /// Gives back up to `quantity` on `key`, never beyond a full limiter,
    /// and answers what the limiter's peek answers afterwards. A refund that
    /// empties the limiter deletes the key; an absent key stays absent.
    pub fn refund(&self, key: &mut Key, now: i64, quantity: i64) -> Result<Verdict, CmdError> {
        self.check(now)?;
        match self {
            Limiter::Gcra(g) => {
                if let Some(tat) = key.integer(error::INVALID_TAT)? {
                    match g.refund(tat, now, quantity) {
                        gcra::Refund::Empty => key.delete(true)?,
                        gcra::Refund::Unchanged => {}
                        gcra::Refund::Store { tat, expire_at_ms } => {
                            key.set_integer_expiring_at(tat, expire_at_ms, None, c"set")?
                        }
                    }
                }
            }
            Limiter::Exact(sw) => refund_window(key, sw.window(), now, quantity, false)?,
            Limiter::Approx(a) => refund_window(key, a.window(), now, quantity, true)?,
            Limiter::Fixed(fw) => {
                let found = counter(key)?;
                let current = found.and_then(|c| c.expire_at_ms);
                match fw.refund(found, now, quantity) {
                    None => {}
                    Some(Counter { count: 0, .. }) => key.delete(true)?,
                    Some(Counter {
                        count,
                        expire_at_ms,
                    }) => {
                        let expire_at_ms = expire_at_ms.ok_or(error::INTERNAL)?;
                        key.set_integer_expiring_at(count, expire_at_ms, current, c"decrby")?
                    }
                }
            }
        }
        Ok(self.decide(key, now, 0)?.verdict)
    }
}

/// A sliding window refund: the effect, replicated as `SW.UNRECORD` when
/// there was a window to give back to.
fn refund_window(
    key: &mut Key,
    window: i64,
    now: i64,
    quantity: i64,
    approx: bool,
) -> Result<(), CmdError> {
    if quantity > 0 && unrecord(key, window, now, quantity, approx)? {
        replicate_window_effect(key, c"SW.UNRECORD", window, now, quantity, approx);
    }
    Ok(())
}

/// A fixed-window counter as found in `key`: its count and expiry.
fn counter(key: &Key) -> Result<Option<Counter>, CmdError> {
    Ok(key.integer(error::INVALID_COUNTER)?.map(|count| Counter {
        count,
        expire_at_ms: key.abs_expire(),
    }))
}

/// The sliding window state of `key`, checked against the mode asked for
/// (exact or APPROX: a key of one is an error for the other).
fn window_state(key: &mut Key, approx: bool) -> Result<Option<&mut WindowState>, CmdError> {
    match key.value::<WindowState>(&WINDOW_TYPE)? {
        Some(WindowState::Approx(_)) if !approx => Err(error::APPROX_KEY),
        Some(WindowState::Exact { .. }) if approx => Err(error::EXACT_KEY),
        state => Ok(state),
    }
}

/// After a sliding window was changed: fires `event` and sets the key's
/// expiry (when its newest request leaves the window).
fn window_written(
    key: &mut Key,
    event: &'static CStr,
    expire_at_ms: Option<i64>,
) -> Result<(), CmdError> {
    key.changed();
    key.notify(raw::NotifyEvent::MODULE, event);
    match expire_at_ms {
        Some(ms) => key.set_abs_expire(ms),
        None => Ok(()),
    }
}

impl Decided {
    /// A decision with no repair, whose write is written only when the
    /// call goes ahead.
    #[inline(always)]
    pub fn plain(verdict: Verdict, write: Write) -> Decided {
        Decided {
            verdict,
            write,
            repair: None,
            always: false,
        }
    }

    /// Writes what the call writes: the write itself when the call goes
    /// ahead or counts every hit (which sets the expiry a repair would),
    /// otherwise the repair.
    #[inline(always)]
    pub fn apply(&self, key: &mut Key, goes_ahead: bool) -> Result<(), CmdError> {
        if (goes_ahead || self.always) && self.write != Write::None {
            return apply(key, self.write);
        }
        match self.repair {
            Some(expire_at_ms) => key.expire_at(expire_at_ms),
            None => Ok(()),
        }
    }

    /// [`Decided::apply`] for a call that goes ahead unless limited; its
    /// verdict once written.
    #[inline(always)]
    pub fn applied(&self, key: &mut Key) -> Result<Verdict, CmdError> {
        self.apply(key, !self.verdict.limited)
            .map(|()| self.verdict)
    }
}

/// Performs `write` on `key` and replicates it as an effect with absolute
/// times: `SET key value PXAT ms` for strings, `SW.RECORD` for windows.
#[inline(always)]
pub fn apply(key: &mut Key, write: Write) -> Result<(), CmdError> {
    match write {
        Write::None => Ok(()),
        Write::Tat { tat, expire_at_ms } => {
            key.set_integer_expiring_at(tat, expire_at_ms, None, c"set")
        }
        Write::Count {
            count,
            expire_at_ms,
            current,
        } => key.set_integer_expiring_at(count, expire_at_ms, current, c"incrby"),
        Write::Record {
            window,
            at,
            quantity,
            approx,
        } => {
            record(key, window, at, quantity, approx)?;
            replicate_window_effect(key, c"SW.RECORD", window, at, quantity, approx);
            Ok(())
        }
    }
}

/// Records a request at `at`, fires `sw.allow` and sets the key's expiry:
/// the one write path of a sliding window, shared by `SW.ALLOW` on the
/// master and `SW.RECORD` on replicas and in the AOF. On error nothing
/// changed.
pub fn record(
    key: &mut Key,
    window: i64,
    at: i64,
    quantity: i64,
    approx: bool,
) -> Result<(), CmdError> {
    within_64_bits(window, at, approx)?;
    let bad = |_| error::BAD_RECORD;
    let expire = match window_state(key, approx)? {
        Some(state) => {
            match state {
                WindowState::Exact { log, window: w } => {
                    sliding::record(log, window, at, quantity).map_err(bad)?;
                    *w = Some(window);
                }
                WindowState::Approx(c) => {
                    *c = sliding_approx::record(Some(*c), window, at, quantity)
                }
            }
            state.expire_at_ms()
        }
        None => {
            let state = if approx {
                WindowState::Approx(sliding_approx::record(None, window, at, quantity))
            } else {
                let mut log = Log::new();
                sliding::record(&mut log, window, at, quantity).map_err(bad)?;
                WindowState::Exact {
                    log,
                    window: Some(window),
                }
            };
            let expire = state.expire_at_ms();
            key.set_value(&WINDOW_TYPE, state)?;
            expire
        }
    };
    window_written(key, c"sw.allow", expire)
}

/// Gives back `quantity` at `at` in a sliding window: the one path shared
/// by `SW.REFUND` on the master and `SW.UNRECORD` on replicas and in the
/// AOF. The key is deleted when nothing is left in its window (without
/// replicating a `DEL`: the effect replays to the same result). An absent
/// key stays absent; returns whether the key held a window.
pub fn unrecord(
    key: &mut Key,
    window: i64,
    at: i64,
    quantity: i64,
    approx: bool,
) -> Result<bool, CmdError> {
    within_64_bits(window, at, approx)?;
    let Some(state) = window_state(key, approx)? else {
        return Ok(false);
    };
    match state {
        WindowState::Exact { log, window: w } => {
            sliding::unrecord(log, window, at, quantity).map_err(|_| error::BAD_RECORD)?;
            *w = Some(window);
        }
        WindowState::Approx(c) => *c = sliding_approx::unrecord(Some(*c), window, at, quantity),
    }
    // An empty window has no expiry: the key goes.
    match state.expire_at_ms() {
        None => key.delete(false)?,
        expire => window_written(key, c"sw.refund", expire)?,
    }
    Ok(true)
}

/// The end-of-2262 rule for a window effect at `at`, as for the call that
/// made it.
fn within_64_bits(window: i64, at: i64, approx: bool) -> Result<(), CmdError> {
    let checked = if approx {
        sliding_approx::check(window, at)
    } else {
        sliding::check(window, at)
    };
    Ok(checked?)
}

/// `SW.RECORD` or `SW.UNRECORD key window_ns at_ns [quantity] [APPROX]`,
/// the quantity left out when it is 1 (one argument object fewer for every
/// replica and the AOF to handle).
#[inline]
fn replicate_window_effect(
    key: &Key,
    command: &CStr,
    window: i64,
    at: i64,
    quantity: i64,
    approx: bool,
) {
    key.replicate_window(command, window, at, quantity, approx);
}

/// The families' names, by [`family`], as errors name them.
pub const FAMILIES: [&str; 4] = ["GCRA", "SW", "SW APPROX", "FW"];

impl Limiter {
    /// The same limiter, a fixed window counting every hit (`COUNTALL`);
    /// any other limiter unchanged.
    pub fn counting_all(self) -> Self {
        match self {
            Limiter::Fixed(fw) => Limiter::Fixed(fw.counting(true)),
            other => other,
        }
    }
}

/// What a key of a limiter holds: a policy keeps it across `SET` (and a
/// trial has its policy's), so that its keys stay readable.
pub fn family(l: &Limiter) -> u8 {
    match l {
        Limiter::Gcra(_) => 0,
        Limiter::Exact(_) => 1,
        Limiter::Approx(_) => 2,
        Limiter::Fixed(_) => 3,
    }
}

/// The kinds of limiter a limiter's words name.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Gcra,
    Sliding,
    Fixed,
}

/// The kind a word names: `GCRA`, `SW` or `FW`, in any case.
pub fn kind_of(word: &[u8]) -> Option<Kind> {
    [
        (b"GCRA" as &[u8], Kind::Gcra),
        (b"SW", Kind::Sliding),
        (b"FW", Kind::Fixed),
    ]
    .into_iter()
    .find_map(|(name, kind)| word.eq_ignore_ascii_case(name).then_some(kind))
}

/// A limiter read from its words, and the options read with it.
pub struct Read<'a> {
    pub limiter: Limiter,
    /// The limiter's own options and the `extra` ones.
    pub options: Found<'a>,
    /// The first word not taken.
    pub next: usize,
}

/// Reads a limiter written as `CL.THROTTLEALL` and `CL.POLICY SET` take
/// it, its kind (already read) followed by its parameters from word `at`:
/// `GCRA max_burst count_per_period period`, `SW limit window [APPROX]`,
/// `FW limit window-or-unit [ALIGN] [TZ zone] [COUNTALL]`. Its options, in any order
/// after the parameters and mixed with the `extra` ones, end at a `stop`
/// word. `missing` is the error for parameters that are not all there.
/// The options' syntax is checked before the parameters' values.
pub fn read<'a>(
    word: &dyn Fn(usize) -> Option<&'a [u8]>,
    kind: Kind,
    at: usize,
    extra: &[Opt],
    stop: &dyn Fn(&[u8]) -> bool,
    missing: CmdError,
) -> Result<Read<'a>, CmdError> {
    const GCRA: &[Opt] = &[];
    const SW: &[Opt] = &[options::APPROX];
    const FW: &[Opt] = &[options::ALIGN, options::TZ, options::COUNTALL];
    let (params, own) = match kind {
        Kind::Gcra => (3, GCRA),
        Kind::Sliding => (2, SW),
        Kind::Fixed => (2, FW),
    };
    // Each parameter's word read once: the server is asked for every word
    // it hands over.
    let mut words: [&[u8]; 3] = [&[]; 3];
    for (i, slot) in words.iter_mut().take(params).enumerate() {
        *slot = word(at + i).ok_or(missing)?;
    }
    let (options, next) = options::read(own, extra, word, at + params, stop)?;
    let p = |i: usize| words[i];
    let limiter = match kind {
        Kind::Gcra => Limiter::Gcra(gcra(p(0), p(1), p(2))?),
        Kind::Sliding => sliding(p(0), p(1), options.has(options::APPROX))?,
        Kind::Fixed => fixed(
            p(0),
            p(1),
            options.value(options::TZ),
            options.has(options::ALIGN),
            options.has(options::COUNTALL),
        )?,
    };
    Ok(Read {
        limiter,
        options,
        next,
    })
}
