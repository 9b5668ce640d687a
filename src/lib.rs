//! redis-cell: native rate limiting for Redis and Valkey.
//!
//! This crate is the thin adapter between Redis and the pure algorithms in
//! `cell-core`: it registers the commands, parses arguments, reads the clock
//! once per call, loads and stores state through [`store`], replies, and
//! replicates the effect of every write.

/// Reads one entry of the module API table (`None` when the server does not
/// provide that function).
macro_rules! api {
    ($name:ident) => {
        // SAFETY: Redis fills the API table once, during RedisModule_Init in
        // OnLoad, before any command can run, and never writes it again.
        unsafe { redis_module::raw::$name }
    };
}

mod acl;
mod args;
mod clock;
mod commands;
mod config;
mod error;
mod few;
mod handler;
mod limiter;
mod policies;
mod register;
mod stats;
mod store;
mod types;
mod version;
mod zones;

use policies::POLICY_TYPE;
use redis_module::{raw, redis_module, Context, RedisString, Status};
use types::{LEASE_TYPE, WINDOW_TYPE};

fn init(ctx: &Context, args: &[RedisString]) -> Status {
    if let Some(set_options) = api!(RedisModule_SetModuleOptions) {
        // - I/O errors: a damaged RDB or RESTORE payload is refused instead
        //   of aborting the server, and replicas may load diskless.
        // - Async loading (repl-diskless-load swapdb): the commands keep no
        //   state outside their keys, so serving them from the old dataset
        //   while a new one loads is safe.
        // - No implicit "modified" signal: keys opened for writing are
        //   signalled (WATCH, client tracking) only when written.
        let options = raw::REDISMODULE_OPTIONS_HANDLE_IO_ERRORS
            | raw::REDISMODULE_OPTIONS_HANDLE_REPL_ASYNC_LOAD
            | raw::REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED;
        // SAFETY: called during OnLoad with the load context.
        unsafe { set_options(ctx.ctx, options as std::os::raw::c_int) };
    }
    clock::init();
    store::init();
    zones::init();
    let Some(config) = config::read(ctx, args) else {
        return Status::Err;
    };
    if !config::apply(ctx, &config) || policies::subscribe_to_events(ctx) == Status::Err {
        return Status::Err;
    }
    register::register_all(ctx, config.gcra)
}

redis_module! {
    name: "redis-cell",
    version: version::MODULE_VERSION,
    allocator: (redis_module::alloc::RedisAlloc, redis_module::alloc::RedisAlloc),
    data_types: [WINDOW_TYPE, LEASE_TYPE, POLICY_TYPE],
    init: init,
}
