//! One file per command, each with the same shape: check the arity, parse
//! the arguments, read the clock, load the state, let `cell-core` decide,
//! store and replicate the effect, reply.

mod docs;
mod fixed;
mod sliding;
mod throttle;

use crate::handler::dispatch;
use crate::stats::Stats;
pub use docs::{Arg, ArgKind, Docs};
use redis_module::raw;
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
entry!(sw_record, sliding::record, SW_RECORD);
entry!(sw_load, sliding::load, SW_LOAD);
entry!(fw_incr, fixed::incr, FW_INCR);

pub const ALL: &[Command] = &[
    Command {
        name: "cl.throttle",
        stats: &CL_THROTTLE,
        docs: &docs::CL_THROTTLE,
        flags: "write deny-oom fast",
        entry: cl_throttle,
    },
    Command {
        name: "cl.peek",
        stats: &CL_PEEK,
        docs: &docs::CL_PEEK,
        flags: "readonly fast",
        entry: cl_peek,
    },
    Command {
        name: "sw.allow",
        stats: &SW_ALLOW,
        docs: &docs::SW_ALLOW,
        flags: "write deny-oom fast",
        entry: sw_allow,
    },
    Command {
        name: "fw.incr",
        stats: &FW_INCR,
        docs: &docs::FW_INCR,
        flags: "write deny-oom fast",
        entry: fw_incr,
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
