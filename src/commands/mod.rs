//! One file per command, each with the same shape: check the arity, parse
//! the arguments, read the clock, load the state, let `cell-core` decide,
//! store and replicate the effect, reply.

mod docs;
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
use crate::error::CmdError;
use crate::handler::{dispatch, Reply};
use crate::limiter::{self, Kind, Limiter};
use crate::policies::{registry, Refusal};
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
/// limiter's own (`APPROX`; `ALIGN`, `TZ`).
const LIMIT_OPTIONS: &[Opt] = &[options::QUANTITY, options::MS, options::SHADOW];
/// The options of their peeks after the limiter's own.
const PEEK_OPTIONS: &[Opt] = &[options::MS];

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

/// `CL.THROTTLE`, `SW.ALLOW`, `FW.INCR`: a limiter, then a quantity, `MS`
/// and `SHADOW`.
fn limit_command(ctx: &Context, args: &Args, kind: Kind) -> Result<Reply, CmdError> {
    let read = read_limiter(args, kind, LIMIT_OPTIONS)?;
    let watch = Watch {
        shadow: read.options.has(options::SHADOW),
        policy: None,
    };
    let quantity = read.options.quantity.unwrap_or(1);
    enforce(
        ctx,
        args,
        read.limiter,
        quantity,
        unit(&read.options),
        watch,
    )
}

/// Their peeks: a limiter, then `MS`.
fn peek_command(ctx: &Context, args: &Args, kind: Kind) -> Result<Reply, CmdError> {
    let read = read_limiter(args, kind, PEEK_OPTIONS)?;
    single(
        ctx,
        args,
        read.limiter,
        0,
        unit(&read.options),
        Access::Read,
    )
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

/// The shape of every single-limiter command that writes: [`single`], then
/// the policy's counters and the refusal's record for `CL.TOP`, and in
/// shadow mode a refusal answered as allowed (`limited` 0, `retry_after`
/// -1, the other three integers as enforced). What is written is what
/// enforcing writes.
fn enforce(
    ctx: &Context,
    args: &Args,
    limiter: Limiter,
    quantity: i64,
    unit: Unit,
    watch: Watch,
) -> Result<Reply, CmdError> {
    enforce_at(
        ctx,
        args,
        limiter,
        quantity,
        unit,
        watch,
        clock::now_nanos(),
    )
}

/// [`enforce`] at the instant `now` (read once by the caller, which decides
/// something else at the same instant).
fn enforce_at(
    ctx: &Context,
    args: &Args,
    limiter: Limiter,
    quantity: i64,
    unit: Unit,
    watch: Watch,
    now: i64,
) -> Result<Reply, CmdError> {
    let mut key = open_key(ctx, args, Access::Write)?;
    let decided = match limiter.decide(&mut key, now, quantity) {
        Ok(decided) => decided,
        Err(e) => {
            if watch.policy.is_some() {
                registry().record(watch.policy, Outcome::Error, None);
            }
            return Err(e);
        }
    };
    decided.apply(&mut key, !decided.verdict.limited)?;
    let v = decided.verdict;
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

/// Declares the C entry point of a command handler.
macro_rules! entry {
    ($name:ident, $run:path, $stats:ident) => {
        static $stats: Stats = Stats::new();
        extern "C" fn $name(
            ctx: *mut raw::RedisModuleCtx,
            argv: *mut *mut raw::RedisModuleString,
            argc: c_int,
        ) -> c_int {
            dispatch(ctx, argv, argc, $run, &$stats)
        }
    };
}

entry!(cl_throttle, throttle::throttle, CL_THROTTLE);
entry!(cl_peek, throttle::peek, CL_PEEK);
entry!(cl_throttleall, throttle_all::throttle_all, CL_THROTTLEALL);
entry!(cl_reserve, reserve::reserve, CL_RESERVE);
entry!(cl_refund, refund::cl, CL_REFUND);
entry!(sw_refund, refund::sw, SW_REFUND);
entry!(fw_refund, refund::fw, FW_REFUND);
entry!(sw_unrecord, sliding::unrecord, SW_UNRECORD);
entry!(sw_allow, sliding::allow, SW_ALLOW);
entry!(sw_peek, sliding::peek, SW_PEEK);
entry!(sw_record, sliding::record, SW_RECORD);
entry!(sw_load, sliding::load, SW_LOAD);
entry!(cc_acquire, lease::acquire, CC_ACQUIRE);
entry!(cc_release, lease::release, CC_RELEASE);
entry!(cc_renew, lease::renew, CC_RENEW);
entry!(cc_peek, lease::peek, CC_PEEK);
entry!(cc_hold, lease::hold_effect, CC_HOLD);
entry!(cc_drop, lease::drop_effect, CC_DROP);
entry!(cc_load, lease::load, CC_LOAD);
entry!(fw_incr, fixed::incr, FW_INCR);
entry!(fw_peek, fixed::peek, FW_PEEK);
entry!(cl_limit, limit::limit, CL_LIMIT);
entry!(cl_policy, policy::policy, CL_POLICY);
entry!(cl_top, top::top, CL_TOP);
entry!(gcra_command, gcra::gcra, GCRA);

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

pub const ALL: &[Command] = &[
    Command {
        name: "cl.throttle",
        stats: &CL_THROTTLE,
        key_use: KeyUse::ReadUpdate,
        role: Role::Public,
        keys: Keys::First,
        docs: &docs::CL_THROTTLE,
        flags: WRITE,
        entry: cl_throttle,
    },
    Command {
        name: "cl.peek",
        stats: &CL_PEEK,
        key_use: KeyUse::Read,
        role: Role::Public,
        keys: Keys::First,
        docs: &docs::CL_PEEK,
        flags: READ,
        entry: cl_peek,
    },
    Command {
        name: "cl.throttleall",
        stats: &CL_THROTTLEALL,
        key_use: KeyUse::ReadUpdate,
        role: Role::Public,
        keys: Keys::Counted,
        docs: &docs::CL_THROTTLEALL,
        flags: "write deny-oom fast getkeys-api",
        entry: cl_throttleall,
    },
    Command {
        name: "cl.reserve",
        stats: &CL_RESERVE,
        key_use: KeyUse::ReadUpdate,
        role: Role::Public,
        keys: Keys::First,
        docs: &docs::CL_RESERVE,
        flags: WRITE,
        entry: cl_reserve,
    },
    Command {
        name: "cl.refund",
        stats: &CL_REFUND,
        key_use: KeyUse::ReadUpdate,
        role: Role::Public,
        keys: Keys::First,
        docs: &docs::CL_REFUND,
        flags: REFUND,
        entry: cl_refund,
    },
    Command {
        name: "sw.allow",
        stats: &SW_ALLOW,
        key_use: KeyUse::ReadUpdate,
        role: Role::Public,
        keys: Keys::First,
        docs: &docs::SW_ALLOW,
        flags: WRITE,
        entry: sw_allow,
    },
    Command {
        name: "sw.peek",
        stats: &SW_PEEK,
        key_use: KeyUse::Read,
        role: Role::Public,
        keys: Keys::First,
        docs: &docs::SW_PEEK,
        flags: READ,
        entry: sw_peek,
    },
    Command {
        name: "sw.refund",
        stats: &SW_REFUND,
        key_use: KeyUse::ReadDelete,
        role: Role::Public,
        keys: Keys::First,
        docs: &docs::SW_REFUND,
        flags: REFUND,
        entry: sw_refund,
    },
    Command {
        name: "fw.incr",
        stats: &FW_INCR,
        key_use: KeyUse::ReadUpdate,
        role: Role::Public,
        keys: Keys::First,
        docs: &docs::FW_INCR,
        flags: WRITE,
        entry: fw_incr,
    },
    Command {
        name: "fw.peek",
        stats: &FW_PEEK,
        key_use: KeyUse::Read,
        role: Role::Public,
        keys: Keys::First,
        docs: &docs::FW_PEEK,
        flags: READ,
        entry: fw_peek,
    },
    Command {
        name: "fw.refund",
        stats: &FW_REFUND,
        key_use: KeyUse::ReadUpdate,
        role: Role::Public,
        keys: Keys::First,
        docs: &docs::FW_REFUND,
        flags: REFUND,
        entry: fw_refund,
    },
    Command {
        name: "cc.acquire",
        stats: &CC_ACQUIRE,
        key_use: KeyUse::ReadUpdate,
        role: Role::Public,
        keys: Keys::First,
        docs: &docs::CC_ACQUIRE,
        flags: LEASE_WRITE,
        entry: cc_acquire,
    },
    Command {
        name: "cc.release",
        stats: &CC_RELEASE,
        key_use: KeyUse::Delete,
        role: Role::Public,
        keys: Keys::First,
        docs: &docs::CC_RELEASE,
        flags: LEASE_REFUND,
        entry: cc_release,
    },
    Command {
        name: "cc.renew",
        stats: &CC_RENEW,
        key_use: KeyUse::Update,
        role: Role::Public,
        keys: Keys::First,
        docs: &docs::CC_RENEW,
        flags: LEASE_REFUND,
        entry: cc_renew,
    },
    Command {
        name: "cc.peek",
        stats: &CC_PEEK,
        key_use: KeyUse::Read,
        role: Role::Public,
        keys: Keys::First,
        docs: &docs::CC_PEEK,
        flags: LEASE_READ,
        entry: cc_peek,
    },
    Command {
        name: "cl.limit",
        stats: &CL_LIMIT,
        key_use: KeyUse::ReadUpdate,
        role: Role::Public,
        keys: Keys::First,
        docs: &docs::CL_LIMIT,
        flags: WRITE,
        entry: cl_limit,
    },
    // A container of subcommands where the server has them (Redis 7.0+,
    // Valkey; see POLICY_SUBCOMMANDS), so that SET and DEL are writes to
    // the server (paused by CLIENT PAUSE WRITE and failovers, refused on
    // replicas, under OOM, NOREPLICAS and in read-only scripts) while GET
    // and LIST run anywhere. Where it has none (Redis 6.2), one command
    // with these flags: `may-replicate` is what CLIENT PAUSE WRITE holds
    // back there, and SET and DEL make a write's other checks themselves.
    // `admin` puts both operators' commands in @admin (and @dangerous) on
    // every server, which is all a server without module ACL categories
    // can tell about them.
    Command {
        name: "cl.policy",
        stats: &CL_POLICY,
        key_use: KeyUse::Read,
        role: Role::Admin,
        keys: Keys::None,
        docs: &docs::CL_POLICY,
        flags: "may-replicate admin",
        entry: cl_policy,
    },
    Command {
        name: "cl.top",
        stats: &CL_TOP,
        key_use: KeyUse::Read,
        role: Role::Admin,
        keys: Keys::None,
        docs: &docs::CL_TOP,
        flags: "readonly admin",
        entry: cl_top,
    },
    // The effects replicas and the AOF replay for the commands above.
    Command {
        name: "sw.record",
        stats: &SW_RECORD,
        key_use: KeyUse::Update,
        role: Role::Effect,
        keys: Keys::First,
        docs: &docs::SW_RECORD,
        flags: "write deny-oom",
        entry: sw_record,
    },
    Command {
        name: "sw.unrecord",
        stats: &SW_UNRECORD,
        key_use: KeyUse::Delete,
        role: Role::Effect,
        keys: Keys::First,
        docs: &docs::SW_UNRECORD,
        flags: "write",
        entry: sw_unrecord,
    },
    Command {
        name: "cc.hold",
        stats: &CC_HOLD,
        key_use: KeyUse::Update,
        role: Role::Effect,
        keys: Keys::First,
        docs: &docs::CC_HOLD,
        flags: "write deny-oom",
        entry: cc_hold,
    },
    Command {
        name: "cc.drop",
        stats: &CC_DROP,
        key_use: KeyUse::Delete,
        role: Role::Effect,
        keys: Keys::First,
        docs: &docs::CC_DROP,
        flags: "write",
        entry: cc_drop,
    },
    Command {
        name: "cc.load",
        stats: &CC_LOAD,
        key_use: KeyUse::Overwrite,
        role: Role::Effect,
        keys: Keys::First,
        docs: &docs::CC_LOAD,
        flags: "write deny-oom",
        entry: cc_load,
    },
    Command {
        name: "sw.load",
        stats: &SW_LOAD,
        key_use: KeyUse::Overwrite,
        role: Role::Effect,
        keys: Keys::First,
        docs: &docs::SW_LOAD,
        flags: "write deny-oom",
        entry: sw_load,
    },
];

/// A subcommand of a container command: its name, flags and docs. Every
/// subcommand runs the container's handler, which reads the subcommand
/// from its first argument as it does where the server has no subcommands.
pub struct Subcommand {
    pub name: &'static str,
    pub flags: &'static str,
    pub docs: &'static Docs,
}

/// `CL.POLICY`'s subcommands, where the server has subcommands.
pub const POLICY_SUBCOMMANDS: &[Subcommand] = &[
    Subcommand {
        name: "set",
        flags: "write deny-oom admin",
        docs: &docs::CL_POLICY_SET,
    },
    Subcommand {
        name: "del",
        flags: "write admin",
        docs: &docs::CL_POLICY_DEL,
    },
    Subcommand {
        name: "promote",
        flags: "write deny-oom admin",
        docs: &docs::CL_POLICY_PROMOTE,
    },
    Subcommand {
        name: "get",
        flags: "readonly admin",
        docs: &docs::CL_POLICY_GET,
    },
    Subcommand {
        name: "list",
        flags: "readonly admin",
        docs: &docs::CL_POLICY_LIST,
    },
    Subcommand {
        name: "help",
        flags: "readonly admin allow-loading allow-stale",
        docs: &docs::CL_POLICY_HELP,
    },
];

/// The subcommands of the command `name`, if it is a container.
pub fn subcommands_of(name: &str) -> &'static [Subcommand] {
    match name {
        "cl.policy" => POLICY_SUBCOMMANDS,
        _ => &[],
    }
}
/// `GCRA` (Redis 8.8's milestone command), registered only when the module
/// is loaded with `gcra-command yes` and the server has no `GCRA` of its
/// own: never in [`ALL`].
pub const GCRA_COMMAND: Command = Command {
    name: "gcra",
    stats: &GCRA,
    key_use: KeyUse::ReadUpdate,
    role: Role::Public,
    keys: Keys::First,
    docs: &docs::GCRA,
    flags: WRITE,
    entry: gcra_command,
};
