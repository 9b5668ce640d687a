//! One file per command, each with the same shape: check the arity, parse
//! the arguments, read the clock, load the state, let `cell-core` decide,
//! store and replicate the effect, reply.

mod fixed;
mod sliding;
mod throttle;

use crate::handler::dispatch;
use redis_module::raw;
use std::os::raw::c_int;

/// A command as registered with Redis. Every command takes one key, its
/// first argument (key positions 1,1,1).
pub struct Command {
    pub name: &'static str,
    pub flags: &'static str,
    pub entry: unsafe extern "C" fn(
        *mut raw::RedisModuleCtx,
        *mut *mut raw::RedisModuleString,
        c_int,
    ) -> c_int,
}

/// Declares the C entry point of a command handler.
macro_rules! entry {
    ($name:ident, $run:path) => {
        extern "C" fn $name(
            ctx: *mut raw::RedisModuleCtx,
            argv: *mut *mut raw::RedisModuleString,
            argc: c_int,
        ) -> c_int {
            dispatch(ctx, argv, argc, $run)
        }
    };
}

entry!(cl_throttle, throttle::throttle);
entry!(cl_peek, throttle::peek);
entry!(sw_allow, sliding::allow);
entry!(sw_record, sliding::record);
entry!(sw_load, sliding::load);
entry!(fw_incr, fixed::incr);

pub const ALL: &[Command] = &[
    Command {
        name: "cl.throttle",
        flags: "write deny-oom fast",
        entry: cl_throttle,
    },
    Command {
        name: "cl.peek",
        flags: "readonly fast",
        entry: cl_peek,
    },
    Command {
        name: "sw.allow",
        flags: "write deny-oom fast",
        entry: sw_allow,
    },
    Command {
        name: "fw.incr",
        flags: "write deny-oom fast",
        entry: fw_incr,
    },
    // The effects replicas and the AOF replay for SW.ALLOW.
    Command {
        name: "sw.record",
        flags: "write deny-oom",
        entry: sw_record,
    },
    Command {
        name: "sw.load",
        flags: "write deny-oom",
        entry: sw_load,
    },
];
