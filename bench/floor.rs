//! The module API's floor, for the benchmark: `FLOOR.ONE key` does only
//! what `CL.THROTTLE` cannot avoid (read the clock, open the key, read and
//! rewrite a 19-digit string in place, set an absolute expiry, replicate
//! `SET key value PXAT ms`, reply five integers); `FLOOR.TWO key key` does
//! it for two keys and replies six integers, as `CL.THROTTLEALL` with two
//! limiters must. Every ratio "to the floor" in the benchmark divides by
//! these. `FLOOR.INT key` does `FLOOR.ONE`'s work keeping the value
//! integer-encoded, as built-in commands store integers: the module API can
//! only do that through `RedisModule_Call` (`GET`, then `SET ... PXAT`).

use redis_module::{raw, redis_module, Context, RedisString, Status};
use std::os::raw::{c_char, c_int};
use std::sync::atomic::{AtomicPtr, Ordering};

static PXAT: AtomicPtr<raw::RedisModuleString> = AtomicPtr::new(std::ptr::null_mut());

fn now_nanos() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec for the call.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// Reads the 19-digit value of `name` (creating it), writes a new one in
/// place, sets an absolute expiry and replicates `SET name value PXAT ms`.
///
/// # Safety
///
/// `ctx` and `name` are the live context and an argument of the running
/// command; the API table is filled (the module is loaded).
unsafe fn touch(ctx: *mut raw::RedisModuleCtx, name: *mut raw::RedisModuleString, now: i64) {
    unsafe {
        let key = raw::RedisModule_OpenKey.unwrap()(
            ctx,
            name,
            (raw::REDISMODULE_READ | raw::REDISMODULE_WRITE) as c_int,
        );
        let mut len = 0usize;
        let mut ptr =
            raw::RedisModule_StringDMA.unwrap()(key, &mut len, raw::REDISMODULE_WRITE as c_int);
        if len != 19 {
            raw::RedisModule_StringTruncate.unwrap()(key, 19);
            ptr =
                raw::RedisModule_StringDMA.unwrap()(key, &mut len, raw::REDISMODULE_WRITE as c_int);
        }
        let digits = std::slice::from_raw_parts_mut(ptr.cast::<u8>(), 19);
        let old = digits.iter().fold(0i64, |v, &d| {
            v.wrapping_mul(10)
                .wrapping_add(i64::from(d.wrapping_sub(b'0')))
        });
        let mut value = old.max(now) % 9_000_000_000_000_000_000 + 1_000_000_000;
        for d in digits.iter_mut().rev() {
            *d = b'0' + (value % 10) as u8;
            value /= 10;
        }
        let expire_ms = now / 1_000_000 + 60_000;
        raw::RedisModule_SetAbsExpire.unwrap()(key, expire_ms);
        // The cheapest arguments: a shared PXAT, the expiry as a buffer.
        let mut ms = [0u8; 13];
        let mut v = expire_ms;
        for d in ms.iter_mut().rev() {
            *d = b'0' + (v % 10) as u8;
            v /= 10;
        }
        raw::RedisModule_Replicate.unwrap()(
            ctx,
            c"SET".as_ptr(),
            c"sbsb".as_ptr(),
            name,
            ptr as *const c_char,
            19usize,
            PXAT.load(Ordering::Relaxed),
            ms.as_ptr() as *const c_char,
            ms.len(),
        );
        raw::RedisModule_CloseKey.unwrap()(key);
    }
}

unsafe fn reply_integers(ctx: *mut raw::RedisModuleCtx, n: usize) {
    unsafe {
        raw::RedisModule_ReplyWithArray.unwrap()(ctx, n as _);
        for v in [0, 16, 15, -1, 2, 1].into_iter().take(n) {
            raw::RedisModule_ReplyWithLongLong.unwrap()(ctx, v);
        }
    }
}

extern "C" fn one(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    // SAFETY: Redis passes `argc` valid arguments; the API is loaded.
    unsafe {
        if argc != 2 {
            return raw::RedisModule_WrongArity.unwrap()(ctx);
        }
        touch(ctx, *argv.add(1), now_nanos());
        reply_integers(ctx, 5);
    }
    raw::REDISMODULE_OK as c_int
}

extern "C" fn two(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    // SAFETY: as in `one`.
    unsafe {
        if argc != 3 {
            return raw::RedisModule_WrongArity.unwrap()(ctx);
        }
        let now = now_nanos();
        touch(ctx, *argv.add(1), now);
        touch(ctx, *argv.add(2), now);
        reply_integers(ctx, 6);
    }
    raw::REDISMODULE_OK as c_int
}

extern "C" fn int(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    // SAFETY: as in `one`; call replies are freed once each.
    unsafe {
        if argc != 2 {
            return raw::RedisModule_WrongArity.unwrap()(ctx);
        }
        let now = now_nanos();
        let key = *argv.add(1);
        let got = raw::RedisModule_Call.unwrap()(ctx, c"GET".as_ptr(), c"s".as_ptr(), key);
        let mut len = 0usize;
        let ptr = raw::RedisModule_CallReplyStringPtr.unwrap()(got, &mut len);
        let old = if ptr.is_null() {
            0
        } else {
            std::slice::from_raw_parts(ptr.cast::<u8>(), len)
                .iter()
                .fold(0i64, |v, &d| {
                    v.wrapping_mul(10)
                        .wrapping_add(i64::from(d.wrapping_sub(b'0')))
                })
        };
        raw::RedisModule_FreeCallReply.unwrap()(got);
        let mut value = old.max(now) % 9_000_000_000_000_000_000 + 1_000_000_000;
        let mut digits = [0u8; 19];
        for d in digits.iter_mut().rev() {
            *d = b'0' + (value % 10) as u8;
            value /= 10;
        }
        let mut expire_ms = now / 1_000_000 + 60_000;
        let mut ms = [0u8; 13];
        for d in ms.iter_mut().rev() {
            *d = b'0' + (expire_ms % 10) as u8;
            expire_ms /= 10;
        }
        // "!": the SET is replicated as it is.
        let set = raw::RedisModule_Call.unwrap()(
            ctx,
            c"SET".as_ptr(),
            c"!sbcb".as_ptr(),
            key,
            digits.as_ptr() as *const c_char,
            digits.len(),
            c"PXAT".as_ptr(),
            ms.as_ptr() as *const c_char,
            ms.len(),
        );
        if set.is_null() {
            return raw::RedisModule_ReplyWithError.unwrap()(
                ctx,
                c"ERR FLOOR.INT: SET failed".as_ptr(),
            );
        }
        if raw::RedisModule_CallReplyType.unwrap()(set) == raw::REDISMODULE_REPLY_ERROR as c_int {
            return raw::RedisModule_ReplyWithCallReply.unwrap()(ctx, set);
        }
        raw::RedisModule_FreeCallReply.unwrap()(set);
        reply_integers(ctx, 5);
    }
    raw::REDISMODULE_OK as c_int
}

type Handler =
    extern "C" fn(*mut raw::RedisModuleCtx, *mut *mut raw::RedisModuleString, c_int) -> c_int;

fn init(ctx: &Context, _args: &[RedisString]) -> Status {
    // SAFETY: called during OnLoad; the names and flags are NUL-terminated.
    unsafe {
        let pxat =
            raw::RedisModule_CreateString.unwrap()(std::ptr::null_mut(), c"PXAT".as_ptr(), 4);
        PXAT.store(pxat, Ordering::Relaxed);
        let create = raw::RedisModule_CreateCommand.unwrap();
        let flags = c"write deny-oom fast".as_ptr();
        let commands = [
            (c"floor.one", one as Handler, 1),
            (c"floor.two", two, 2),
            (c"floor.int", int, 1),
        ];
        for (name, handler, last) in commands {
            if create(ctx.ctx, name.as_ptr(), Some(handler), flags, 1, last, 1)
                != raw::REDISMODULE_OK as c_int
            {
                return Status::Err;
            }
        }
    }
    Status::Ok
}

redis_module! {
    name: "cell-floor",
    version: 1,
    allocator: (redis_module::alloc::RedisAlloc, redis_module::alloc::RedisAlloc),
    data_types: [],
    init: init,
}
