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

mod args;
mod clock;
mod commands;
mod error;
mod handler;
mod register;
mod stats;
mod store;
mod window_type;

use redis_module::{redis_module, Context, RedisString, Status};
use window_type::WINDOW_TYPE;

/// Reported by `MODULE LIST`; bumped on every release.
pub const MODULE_VERSION: i32 = 1;
/// The version as text, for logs and `COMMAND DOCS`.
pub const MODULE_VERSION_TEXT: &str = env!("CARGO_PKG_VERSION");

fn init(ctx: &Context, _args: &[RedisString]) -> Status {
    clock::init();
    store::init();
    register::register_all(ctx)
}

redis_module! {
    name: "redis-cell",
    version: MODULE_VERSION,
    allocator: (redis_module::alloc::RedisAlloc, redis_module::alloc::RedisAlloc),
    data_types: [WINDOW_TYPE],
    init: init,
}
