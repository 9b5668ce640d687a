//! The boundary between Redis and the commands: dispatch, replies, the
//! outcome counters, and the last line of defence against panics.

use crate::args::Args;
use crate::error::{self, CmdError};
use crate::stats::{Outcome, Stats};
use cell_core::reply::{Unit, Verdict};
use redis_module::{raw, Context};
use std::ffi::CString;
use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// What a command answers when it succeeds.
pub enum Reply {
    /// `[limited, limit, remaining, retry_after, reset_after]`.
    Verdict(Verdict, Unit),
    /// The five integers of the binding limiter and its 1-based index.
    Binding(Verdict, usize, Unit),
    /// Refused, but answered allowed (shadow mode): the verdict as
    /// answered, and the binding index for `CL.THROTTLEALL`.
    Shadowed(Verdict, Option<usize>, Unit),
    /// An admission later: the state after it, and the wait (reported
    /// rounded up) in place of `retry_after`.
    Reserved(Verdict, i64, Unit),
    /// `CC.ACQUIRE`: the five integers, then the lease id (nil if refused).
    Lease(Verdict, Option<Vec<u8>>, Unit),
    /// A plain integer.
    Integer(i64),
    /// The call only asked where the keys are, and they were reported.
    KeysReported,
    /// `+OK`.
    Ok,
    /// Any other reply (`CL.POLICY GET`, `CL.TOP`).
    Value(Value),
}

/// A reply of strings, integers and arrays.
pub enum Value {
    Int(i64),
    Bytes(Vec<u8>),
    Array(Vec<Value>),
}

fn reply_value(ctx: *mut raw::RedisModuleCtx, value: &Value) {
    match value {
        Value::Int(n) => {
            raw::reply_with_long_long(ctx, *n);
        }
        Value::Bytes(b) => {
            raw::reply_with_string_buffer(ctx, b.as_ptr().cast(), b.len());
        }
        Value::Array(items) => {
            raw::reply_with_array(ctx, items.len() as _);
            for item in items {
                reply_value(ctx, item);
            }
        }
    }
}

/// Runs one command (its handler `run`: on error nothing was written and
/// the error is the whole reply), replies, and counts the outcome. A panic that escapes
/// a handler is caught here and answered as an error instead of aborting
/// the server (handlers are written so that none can happen). Generic over
/// the handler, so that each command's entry point calls its own directly
/// (no call through a pointer, and the handler's result built in place).
#[inline(always)]
pub fn dispatch(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
    run: impl FnOnce(&Context, &Args) -> Result<Reply, CmdError>,
    stats: &Stats,
) -> c_int {
    let context = Context::new(ctx);
    // SAFETY: Redis passes `argc` argument strings at `argv`, valid for the
    // duration of this call.
    let args = unsafe { Args::new(argv, argc) };
    let result =
        catch_unwind(AssertUnwindSafe(|| run(&context, &args))).unwrap_or(Err(error::INTERNAL));
    reply(ctx, result, stats)
}

/// Replies with a handler's result and counts its outcome.
fn reply(ctx: *mut raw::RedisModuleCtx, result: Result<Reply, CmdError>, stats: &Stats) -> c_int {
    let outcome = match result {
        Ok(Reply::Verdict(v, unit)) => {
            reply_integers(ctx, &v.to_reply_in(unit), None);
            Outcome::of(&v)
        }
        Ok(Reply::Binding(v, index, unit)) => {
            reply_integers(ctx, &v.to_reply_in(unit), Some(index as i64));
            Outcome::of(&v)
        }
        Ok(Reply::Shadowed(v, index, unit)) => {
            reply_integers(ctx, &v.to_reply_in(unit), index.map(|i| i as i64));
            Outcome::ShadowRefused
        }
        Ok(Reply::Reserved(v, wait, unit)) => {
            let mut reply = v.to_reply_in(unit);
            reply[3] = unit.ceil(wait);
            reply_integers(ctx, &reply, None);
            Outcome::of(&v)
        }
        Ok(Reply::Lease(v, id, unit)) => {
            raw::reply_with_array(ctx, 6);
            for n in v.to_reply_in(unit) {
                raw::reply_with_long_long(ctx, n);
            }
            match id {
                Some(id) => {
                    raw::reply_with_string_buffer(ctx, id.as_ptr().cast(), id.len());
                }
                None => {
                    raw::reply_with_null(ctx);
                }
            }
            Outcome::of(&v)
        }
        Ok(Reply::Integer(n)) => {
            raw::reply_with_long_long(ctx, n);
            Outcome::Done
        }
        Ok(Reply::KeysReported) => return raw::Status::Ok as c_int,
        Ok(Reply::Value(value)) => {
            reply_value(ctx, &value);
            Outcome::Done
        }
        Ok(Reply::Ok) => {
            raw::reply_with_simple_string(ctx, c"OK".as_ptr());
            Outcome::Done
        }
        Err(e) => {
            reply_error(ctx, e);
            Outcome::Error
        }
    };
    stats.record(outcome);
    raw::Status::Ok as c_int
}

/// An array of the integers, and one more at the end if given.
fn reply_integers(ctx: *mut raw::RedisModuleCtx, values: &[i64], last: Option<i64>) {
    let (Some(array), Some(integer)) = (
        api!(RedisModule_ReplyWithArray),
        api!(RedisModule_ReplyWithLongLong),
    ) else {
        return;
    };
    // SAFETY: `ctx` is the live context of the running command; the array
    // announced is followed by exactly that many integers.
    unsafe {
        array(ctx, (values.len() + usize::from(last.is_some())) as _);
        for &v in values.iter().chain(last.as_ref()) {
            integer(ctx, v);
        }
    }
}

fn reply_error(ctx: *mut raw::RedisModuleCtx, e: CmdError) {
    match e.text() {
        None => {
            if let Some(wrong_arity) = api!(RedisModule_WrongArity) {
                // SAFETY: `ctx` is the live context of the running command.
                unsafe { wrong_arity(ctx) };
            }
        }
        Some(text) => {
            // Error texts are NUL-free (words in them are printable
            // ASCII); the C string is built on the error path only.
            if let Ok(c) = CString::new(text.as_ref()) {
                raw::reply_with_error(ctx, c.as_ptr());
            }
        }
    }
}
