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
mod error;
mod few;
mod handler;
mod limiter;
mod policy;
mod register;
mod stats;
mod store;
mod types;
mod zones;

use policy::POLICY_TYPE;
use redis_module::{raw, redis_module, Context, RedisString, Status};
use types::{LEASE_TYPE, WINDOW_TYPE};

/// The version as text, for the load log and `COMMAND DOCS`: Cargo.toml's.
pub const MODULE_VERSION_TEXT: &str = env!("CARGO_PKG_VERSION");
/// `MODULE LIST`'s `ver`: the same version as one integer,
/// major * 10000 + minor * 100 + patch (0.4.0 is 400), the rule RedisJSON and
/// RedisBloom follow, so that one number in Cargo.toml sets all three.
pub const MODULE_VERSION: i32 = {
    let minor = decimal(env!("CARGO_PKG_VERSION_MINOR"));
    let patch = decimal(env!("CARGO_PKG_VERSION_PATCH"));
    // Two digits each, or the integer would be ambiguous.
    assert!(
        minor < 100 && patch < 100,
        "minor and patch must be below 100"
    );
    decimal(env!("CARGO_PKG_VERSION_MAJOR")) * 10000 + minor * 100 + patch
};

/// A version component as Cargo gives it (decimal digits), at compile time.
const fn decimal(text: &str) -> i32 {
    let bytes = text.as_bytes();
    assert!(
        !bytes.is_empty() && bytes.len() <= 4,
        "a version component of 1 to 4 digits"
    );
    let mut value = 0;
    let mut i = 0;
    while i < bytes.len() {
        assert!(
            bytes[i].is_ascii_digit(),
            "a version component is decimal digits"
        );
        value = value * 10 + (bytes[i] - b'0') as i32;
        i += 1;
    }
    value
}

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
    let Some((gcra, args)) = opt_in_gcra(ctx, args) else {
        return Status::Err;
    };
    if policy::init(ctx, &args) == Status::Err {
        return Status::Err;
    }
    register::register_all(ctx, gcra)
}

/// Takes `gcra-command yes|no` (the opt-in `GCRA` command; `no` by default)
/// out of the module arguments, and leaves the others, in their pairs, to
/// the policies' configuration. `None` after logging a bad value.
fn opt_in_gcra(ctx: &Context, args: &[RedisString]) -> Option<(bool, Vec<RedisString>)> {
    let mut gcra = false;
    let mut rest = Vec::with_capacity(args.len());
    let mut pairs = args.chunks(2);
    for pair in pairs.by_ref() {
        if !pair[0].as_slice().eq_ignore_ascii_case(b"gcra-command") {
            rest.extend(pair.iter().cloned());
            continue;
        }
        match pair.get(1).map(|v| v.as_slice().to_ascii_lowercase()) {
            Some(v) if v == b"yes" => gcra = true,
            Some(v) if v == b"no" => gcra = false,
            _ => {
                ctx.log_warning("redis-cell: bad module arguments; expected `gcra-command yes` or `gcra-command no`");
                return None;
            }
        }
    }
    Some((gcra, rest))
}

redis_module! {
    name: "redis-cell",
    version: MODULE_VERSION,
    allocator: (redis_module::alloc::RedisAlloc, redis_module::alloc::RedisAlloc),
    data_types: [WINDOW_TYPE, LEASE_TYPE, POLICY_TYPE],
    init: init,
}
