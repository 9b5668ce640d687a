//! The boundary between Redis and the commands: registration, argument
//! views, error replies, and the last line of defence against panics.

use crate::args::Args;
use crate::commands::{self, Command};
use crate::error::{self, CmdError};
use redis_module::{raw, Context, Status};
use std::ffi::CString;
use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Registers every command of [`commands::ALL`].
pub fn register_all(ctx: &Context) -> Status {
    for command in commands::ALL {
        if register(ctx, command).is_err() {
            ctx.log_warning(&format!("redis-cell: could not register {}", command.name));
            return Status::Err;
        }
    }
    Status::Ok
}

fn register(ctx: &Context, command: &Command) -> Result<(), ()> {
    let name = CString::new(command.name).map_err(|_| ())?;
    let flags = CString::new(command.flags).map_err(|_| ())?;
    let create = api!(RedisModule_CreateCommand).ok_or(())?;
    // SAFETY: the context is the one Redis passed to OnLoad, the strings are
    // NUL-terminated and copied by Redis, and the handler is a plain
    // `extern "C"` function with the signature Redis expects.
    let status = unsafe {
        create(
            ctx.ctx,
            name.as_ptr(),
            Some(command.entry),
            flags.as_ptr(),
            1,
            1,
            1,
        )
    };
    if status == raw::Status::Ok as c_int {
        Ok(())
    } else {
        Err(())
    }
}

/// Runs one command: its handler replies on success; on error nothing was
/// written and the error is the whole reply. A panic that escapes a
/// handler is caught here and answered as an error instead of aborting the
/// server (handlers are written so that none can happen).
pub fn dispatch(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
    run: fn(&Context, &Args) -> Result<(), CmdError>,
) -> c_int {
    let context = Context::new(ctx);
    // SAFETY: Redis passes `argc` argument strings at `argv`, valid for the
    // duration of this call.
    let args = unsafe { Args::new(argv, argc) };
    let outcome =
        catch_unwind(AssertUnwindSafe(|| run(&context, &args))).unwrap_or(Err(error::INTERNAL));
    if let Err(e) = outcome {
        reply_error(ctx, e);
    }
    raw::Status::Ok as c_int
}

fn reply_error(ctx: *mut raw::RedisModuleCtx, e: CmdError) {
    match e {
        CmdError::WrongArity => {
            if let Some(wrong_arity) = api!(RedisModule_WrongArity) {
                // SAFETY: `ctx` is the live context of the running command.
                unsafe { wrong_arity(ctx) };
            }
        }
        CmdError::Reply(text) => {
            reply_error_text(ctx, text);
        }
    }
}

fn reply_error_text(ctx: *mut raw::RedisModuleCtx, text: &'static str) {
    // Error texts are static and NUL-free; build the C string once per reply
    // on the error path only.
    if let Ok(c) = CString::new(text) {
        raw::reply_with_error(ctx, c.as_ptr());
    }
}

/// Replies `[limited, limit, remaining, retry_after, reset_after]`.
pub fn reply_five(ctx: &Context, values: [i64; 5]) {
    raw::reply_with_array(ctx.ctx, 5);
    for v in values {
        raw::reply_with_long_long(ctx.ctx, v);
    }
}
