//! One file per command, each with the same shape: check the arity, parse
//! the arguments, read the clock, load the state, let `cell-core` decide,
//! store and replicate the effect, reply.

/// Declares a command beside its handler, once: its C entry point and
/// counters, and everything its registration, `COMMAND DOCS`, key specs and
/// ACL categories are built from. The docs are written with
/// `docs::vocabulary`.
macro_rules! command {
    (
        $(#[$attr:meta])*
        $id:ident: $name:literal => $run:expr,
        flags: $flags:expr,
        keys: $keys:ident, key_use: $key_use:ident, role: $role:ident,
        $(subcommands: $subcommands:expr,)?
        docs: $docs:expr $(,)?
    ) => {
        $(#[$attr])*
        pub static $id: $crate::commands::Command = {
            static STATS: $crate::stats::Stats = $crate::stats::Stats::new();
            static DOCS: $crate::commands::Docs = {
                #[allow(unused_imports)]
                use $crate::commands::docs::vocabulary::*;
                $docs
            };
            extern "C" fn entry(
                ctx: *mut redis_module::raw::RedisModuleCtx,
                argv: *mut *mut redis_module::raw::RedisModuleString,
                argc: std::os::raw::c_int,
            ) -> std::os::raw::c_int {
                $crate::handler::dispatch(ctx, argv, argc, $run, &STATS)
            }
            $crate::commands::Command {
                name: $name,
                flags: $flags,
                stats: &STATS,
                docs: &DOCS,
                keys: $crate::commands::Keys::$keys,
                key_use: $crate::commands::KeyUse::$key_use,
                role: $crate::commands::Role::$role,
                subcommands: command!(@subcommands $($subcommands)?),
                entry,
            }
        };
    };
    (@subcommands) => { &[] };
    (@subcommands $subcommands:expr) => { $subcommands };
}

pub(crate) mod docs;
mod fixed;
mod gcra;
mod lease;
mod limit;
mod policy;
mod refund;
mod reserve;
mod sliding;
mod throttle;
mod throttle_all;
mod top;
mod trial;

use crate::args::Args;
use crate::clock;
use crate::error;
use crate::error::CmdError;
use crate::handler::Reply;
use crate::limiter::{self, Kind, Limiter};
use crate::policies::{self, registry, Refusal};
use crate::stats::Stats;
use crate::store::{Access, Key};
use cell_core::options::{self, Found, Opt};
use cell_core::policy::Outcome;
use cell_core::reply::{Unit, Verdict};
pub use docs::{Arg, ArgKind, Docs};
use redis_module::{raw, Context};
use std::os::raw::c_int;

/// A command as registered with Redis.
pub struct Command {
    pub name: &'static str,
    pub flags: &'static str,
    pub stats: &'static Stats,
    pub docs: &'static Docs,
    pub keys: Keys,
    /// What the command does with its keys, as its key spec tells ACL.
    pub key_use: KeyUse,
    /// Who calls it, which decides its ACL category.
    pub role: Role,
    /// Its subcommands, where the server has them (`CL.POLICY`'s).
    pub subcommands: &'static [Subcommand],
    pub entry: unsafe extern "C" fn(
        *mut raw::RedisModuleCtx,
        *mut *mut raw::RedisModuleString,
        c_int,
    ) -> c_int,
}

/// Who calls a command.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Applications: `@ratelimit`.
    Public,
    /// Operators (policies, top offenders): `@ratelimit-admin`, so that an
    /// application granted `@ratelimit` cannot change or read them.
    Admin,
    /// An effect the module writes for replicas and the AOF: an internal
    /// command where the server has them, `@ratelimit-internal`.
    Effect,
}

/// Where a command's keys are.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Keys {
    /// One key, the first argument (key positions 1,1,1).
    First,
    /// `numkeys key [key ...]` from the first argument on: a key spec
    /// where the server has them, the getkeys API where it does not.
    Counted,
    /// No key: server configuration (`CL.POLICY`, `CL.TOP`), accepted on
    /// any node of a cluster.
    None,
}

/// What a command does with its keys: the flags of its key spec, which
/// ACL checks against read (`%R~`) and write (`%W~`) key permissions.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum KeyUse {
    /// Answers from the value and never writes (the peeks): `RO ACCESS`,
    /// read permission.
    Read,
    /// Answers from the value and updates it (limiters, refunds):
    /// `RW ACCESS UPDATE`, read and write permission.
    ReadUpdate,
    /// Answers from the value and removes entries from it (a sliding
    /// window's refund): `RW ACCESS DELETE`.
    ReadDelete,
    /// Updates the value and answers nothing from it: `RW UPDATE`, write
    /// permission.
    Update,
    /// Removes entries from the value and answers nothing from it:
    /// `RW DELETE`.
    Delete,
    /// Replaces the whole value: `OW UPDATE`.
    Overwrite,
}

/// The options of `CL.THROTTLE`, `SW.ALLOW` and `FW.INCR` after their
/// limiter's own (`APPROX`; `ALIGN`, `TZ`, `COUNTALL`).
const LIMIT_OPTIONS: &[Opt] = &[
    options::QUANTITY,
    options::MS,
    options::SHADOW,
    options::POLICY,
];
/// The options of their peeks after the limiter's own.
const PEEK_OPTIONS: &[Opt] = &[options::MS, options::POLICY];

/// `NAME key <limiter> [options]`: the limiter of `kind` read from word 2
/// as `CL.THROTTLEALL` reads one, with the command's `extra` options; too
/// few words is the wrong arity.
fn read_limiter<'a>(
    args: &Args<'a>,
    kind: Kind,
    extra: &[Opt],
) -> Result<limiter::Read<'a>, CmdError> {
    let word = |i: usize| args.bytes(i);
    limiter::read(&word, kind, 2, extra, &|_| false, CmdError::WrongArity)
}

/// The policy a call names with `POLICY name`, when it exists: the call
/// then uses it as `CL.LIMIT` does, with the call's own `COUNTALL`; when
/// it does not, the call's own limiter decides (the application's numbers
/// as the fallback of a live limit). A policy of another kind than the
/// call's limiter would read its key as another state: an error.
#[inline(always)]
fn named_policy<'a>(
    read: &limiter::Read<'a>,
) -> Result<Option<(&'a [u8], policies::Found)>, CmdError> {
    match read.options.value(options::POLICY) {
        None => Ok(None),
        Some(name) => find_policy(read, name),
    }
}

/// [`named_policy`] when the call names one.
fn find_policy<'a>(
    read: &limiter::Read<'a>,
    name: &'a [u8],
) -> Result<Option<(&'a [u8], policies::Found)>, CmdError> {
    let Some(mut found) = registry().find(name)? else {
        return Ok(None);
    };
    let (holds, takes) = (
        limiter::family(&found.limiter),
        limiter::family(&read.limiter),
    );
    if holds != takes {
        return Err(error::policy_kind(
            name,
            limiter::FAMILIES[usize::from(holds)],
            limiter::FAMILIES[usize::from(takes)],
        ));
    }
    if read.options.has(options::COUNTALL) {
        found.limiter = found.limiter.counting_all();
        found.trial = found.trial.map(Limiter::counting_all);
    }
    Ok(Some((name, found)))
}

/// `CL.THROTTLE`, `SW.ALLOW`, `FW.INCR`: a limiter, then a quantity, `MS`,
/// `SHADOW` and `POLICY`.
fn limit_command(ctx: &Context, args: &Args, kind: Kind) -> Result<Reply, CmdError> {
    let read = read_limiter(args, kind, LIMIT_OPTIONS)?;
    let quantity = read.options.quantity.unwrap_or(1);
    let shadow = read.options.has(options::SHADOW);
    if let Some((name, found)) = named_policy(&read)? {
        let call = Call {
            quantity,
            unit: unit(&read.options),
            shadow,
        };
        return by_policy(ctx, args, name, found, call, clock::now_nanos());
    }
    let watch = Watch {
        shadow,
        policy: None,
    };
    enforce(
        ctx,
        args,
        read.limiter,
        quantity,
        unit(&read.options),
        watch,
        clock::now_nanos(),
    )
}

/// What a call asks of a policy's limiter besides its key.
#[derive(Clone, Copy)]
struct Call {
    quantity: i64,
    unit: Unit,
    /// `SHADOW` given with the call.
    shadow: bool,
}

/// A call of the policy `name` (found): its limiter enforced in its shadow
/// mode or the call's, counted for the policy, then its trial beside it.
fn by_policy(
    ctx: &Context,
    args: &Args,
    name: &[u8],
    found: policies::Found,
    call: Call,
    now: i64,
) -> Result<Reply, CmdError> {
    let watch = Watch {
        shadow: found.shadow || call.shadow,
        policy: Some(name),
    };
    let reply = enforce(
        ctx,
        args,
        found.limiter,
        call.quantity,
        call.unit,
        watch,
        now,
    )?;
    if let Some(t) = found.trial {
        let key = args.word(1);
        trial::run(ctx, name, key, &t, now, call.quantity, &|n| n == key);
    }
    Ok(reply)
}

/// Their peeks: a limiter, then `MS` and `POLICY`.
fn peek_command(ctx: &Context, args: &Args, kind: Kind) -> Result<Reply, CmdError> {
    let read = read_limiter(args, kind, PEEK_OPTIONS)?;
    let limiter = match named_policy(&read)? {
        Some((_, found)) => found.limiter,
        None => read.limiter,
    };
    single(ctx, args, limiter, 0, unit(&read.options), Access::Read)
}

/// The shape of every single-limiter command: open the key, read the
/// clock once, decide, write what a call that goes ahead (or is refused)
/// writes when the command may write, reply.
fn single(
    ctx: &Context,
    args: &Args,
    limiter: Limiter,
    quantity: i64,
    unit: Unit,
    access: Access,
) -> Result<Reply, CmdError> {
    let mut key = open_key(ctx, args, access)?;
    let decided = limiter.decide(&mut key, clock::now_nanos(), quantity)?;
    if access == Access::Write {
        decided.apply(&mut key, !decided.verdict.limited)?;
    }
    Ok(Reply::Verdict(decided.verdict, unit))
}

/// How a limiter call is watched: whether it is in shadow mode (never
/// refuses) and the policy it came from.
#[derive(Clone, Copy, Default)]
pub struct Watch<'a> {
    pub shadow: bool,
    pub policy: Option<&'a [u8]>,
}

/// The shape of every single-limiter command that writes, at the instant
/// `now` (read once by the caller, which may decide something else at the
/// same instant): [`single`], then the policy's counters and the refusal's
/// record for `CL.TOP`, and in shadow mode a refusal answered as allowed
/// (`limited` 0, `retry_after` -1, the other three integers as enforced).
/// What is written is what enforcing writes.
fn enforce(
    ctx: &Context,
    args: &Args,
    limiter: Limiter,
    quantity: i64,
    unit: Unit,
    watch: Watch,
    now: i64,
) -> Result<Reply, CmdError> {
    let mut key = open_key(ctx, args, Access::Write)?;
    let v = match limiter.enforce(&mut key, now, quantity) {
        Ok(written) => written?,
        Err(e) => {
            if watch.policy.is_some() {
                registry().record(watch.policy, Outcome::Error, None);
            }
            return Err(e);
        }
    };
    if v.limited || watch.policy.is_some() {
        let outcome = match (v.limited, watch.shadow) {
            (false, _) => Outcome::Allowed,
            (true, false) => Outcome::Refused,
            (true, true) => Outcome::ShadowRefused,
        };
        let refusal = v.limited.then(|| Refusal {
            key: args.word(1),
            shadow: watch.shadow,
        });
        registry().record(watch.policy, outcome, refusal);
    }
    if v.limited && watch.shadow {
        let shown = Verdict {
            limited: false,
            retry_after: None,
            ..v
        };
        return Ok(Reply::Shadowed(shown, None, unit));
    }
    Ok(Reply::Verdict(v, unit))
}

/// Opens the key of a single-key command (its first argument).
fn open_key(ctx: &Context, args: &Args, access: Access) -> Result<Key, CmdError> {
    Ok(Key::open(
        ctx,
        args.raw(1).ok_or(CmdError::WrongArity)?,
        access,
    ))
}

/// Milliseconds when the `MS` flag was given.
fn unit(found: &Found) -> Unit {
    if found.has(options::MS) {
        Unit::Millis
    } else {
        Unit::Seconds
    }
}

const WRITE: &str = "write deny-oom fast";
/// Refunds and releases free what they touch (or keep its size): allowed
/// under OOM.
const REFUND: &str = "write fast";
const READ: &str = "readonly fast";
/// The lease commands walk the leases held (up to the largest `limit` their
/// callers use): linear, so not `fast`.
const LEASE_WRITE: &str = "write deny-oom";
const LEASE_REFUND: &str = "write";
const LEASE_READ: &str = "readonly";

/// Every command, in the order of registration; `GCRA` apart (opt-in).
pub static ALL: &[&Command] = &[
    &throttle::CL_THROTTLE,
    &throttle::CL_PEEK,
    &throttle_all::CL_THROTTLEALL,
    &reserve::CL_RESERVE,
    &refund::CL_REFUND,
    &sliding::SW_ALLOW,
    &sliding::SW_PEEK,
    &refund::SW_REFUND,
    &fixed::FW_INCR,
    &fixed::FW_PEEK,
    &refund::FW_REFUND,
    &lease::CC_ACQUIRE,
    &lease::CC_RELEASE,
    &lease::CC_RENEW,
    &lease::CC_PEEK,
    &limit::CL_LIMIT,
    &policy::CL_POLICY,
    &top::CL_TOP,
    &sliding::SW_RECORD,
    &sliding::SW_UNRECORD,
    &lease::CC_HOLD,
    &lease::CC_DROP,
    &lease::CC_LOAD,
    &sliding::SW_LOAD,
];

/// A subcommand of a container command: its name, flags and docs. Every
/// subcommand runs the container's handler, which reads the subcommand
/// from its first argument as it does where the server has no subcommands.
pub struct Subcommand {
    pub name: &'static str,
    pub flags: &'static str,
    pub docs: &'static Docs,
}

pub use gcra::GCRA_COMMAND;
