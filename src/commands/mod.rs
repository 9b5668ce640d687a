//! One file per command, each with the same shape: check the arity, parse
//! the arguments, read the clock, load the state, let `cell-core` decide,
//! store and replicate the effect, reply.

mod docs;
mod fixed;
mod sliding;
mod throttle;

use crate::args::{Args, Options};
use crate::clock;
use crate::error::CmdError;
use crate::handler::{dispatch, Reply};
use crate::limiter::Limiter;
use crate::stats::Stats;
use crate::store::{Access, Key};
use cell_core::reply::Unit;
pub use docs::{Arg, ArgKind, Docs};
use redis_module::{raw, Context};
use std::os::raw::c_int;

/// A command as registered with Redis. Every command takes one key, its
/// first argument (key positions 1,1,1).
pub struct Command {
    pub name: &'static str,
    pub flags: &'static str,
    pub stats: &'static Stats,
    pub docs: &'static Docs,
    pub entry: unsafe extern "C" fn(
        *mut raw::RedisModuleCtx,
        *mut *mut raw::RedisModuleString,
        c_int,
    ) -> c_int,
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
    let mut key = Key::open(ctx, args.raw(1).ok_or(CmdError::WrongArity)?, access);
    let decided = limiter.decide(&mut key, clock::now_nanos(), quantity)?;
    if access == Access::Write {
        if decided.verdict.limited {
            decided.apply_repair(&mut key)?;
        } else {
            decided.apply(&mut key)?;
        }
    }
    Ok(Reply::Verdict(decided.verdict, unit))
}

/// Milliseconds when the `MS` flag (the `bit`-th of the command's flags)
/// was given.
fn unit(options: &Options, bit: u32) -> Unit {
    if options.has(bit) {
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
entry!(sw_allow, sliding::allow, SW_ALLOW);
entry!(sw_peek, sliding::peek, SW_PEEK);
entry!(sw_record, sliding::record, SW_RECORD);
entry!(sw_load, sliding::load, SW_LOAD);
entry!(fw_incr, fixed::incr, FW_INCR);
entry!(fw_peek, fixed::peek, FW_PEEK);

const WRITE: &str = "write deny-oom fast";
const READ: &str = "readonly fast";

pub const ALL: &[Command] = &[
    Command {
        name: "cl.throttle",
        stats: &CL_THROTTLE,
        docs: &docs::CL_THROTTLE,
        flags: WRITE,
        entry: cl_throttle,
    },
    Command {
        name: "cl.peek",
        stats: &CL_PEEK,
        docs: &docs::CL_PEEK,
        flags: READ,
        entry: cl_peek,
    },
    Command {
        name: "sw.allow",
        stats: &SW_ALLOW,
        docs: &docs::SW_ALLOW,
        flags: WRITE,
        entry: sw_allow,
    },
    Command {
        name: "sw.peek",
        stats: &SW_PEEK,
        docs: &docs::SW_PEEK,
        flags: READ,
        entry: sw_peek,
    },
    Command {
        name: "fw.incr",
        stats: &FW_INCR,
        docs: &docs::FW_INCR,
        flags: WRITE,
        entry: fw_incr,
    },
    Command {
        name: "fw.peek",
        stats: &FW_PEEK,
        docs: &docs::FW_PEEK,
        flags: READ,
        entry: fw_peek,
    },
    // The effects replicas and the AOF replay for SW.ALLOW.
    Command {
        name: "sw.record",
        stats: &SW_RECORD,
        docs: &docs::SW_RECORD,
        flags: "write deny-oom",
        entry: sw_record,
    },
    Command {
        name: "sw.load",
        stats: &SW_LOAD,
        docs: &docs::SW_LOAD,
        flags: "write deny-oom",
        entry: sw_load,
    },
];
