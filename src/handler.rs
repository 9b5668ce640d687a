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
}

/// A command's handler: on error nothing was written and the error is the
/// whole reply.
pub type Handler = fn(&Context, &Args) -> Result<Reply, CmdError>;

/// Runs one command, replies, and counts the outcome. A panic that escapes
/// a handler is caught here and answered as an error instead of aborting
/// the server (handlers are written so that none can happen).
pub fn dispatch(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
    run: Handler,
    stats: &Stats,
) -> c_int {
    let context = Context::new(ctx);
    // SAFETY: Redis passes `argc` argument strings at `argv`, valid for the
    // duration of this call.
    let args = unsafe { Args::new(argv, argc) };
    let result =
        catch_unwind(AssertUnwindSafe(|| run(&context, &args))).unwrap_or(Err(error::INTERNAL));
    let outcome = match result {
        Ok(Reply::Verdict(v, unit)) => {
            reply_integers(ctx, &v.to_reply_in(unit), None);
            Outcome::of(&v)
        }
        Ok(Reply::Binding(v, index, unit)) => {
            reply_integers(ctx, &v.to_reply_in(unit), Some(index as i64));
            Outcome::of(&v)
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
    raw::reply_with_array(ctx, (values.len() + usize::from(last.is_some())) as _);
    for &v in values.iter().chain(last.as_ref()) {
        raw::reply_with_long_long(ctx, v);
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
