//! The module API's floor, for the benchmark: `FLOOR.ONE key` does only
//! what `CL.THROTTLE` cannot avoid (read the clock, open the key, read and
//! rewrite a 19-digit string in place, set an absolute expiry, replicate
//! `SET key value PXAT ms`, reply five integers); `FLOOR.TWO key key` does
//! it for two keys and replies six integers, as `CL.THROTTLEALL` with two
//! limiters must. Every ratio "to the floor" in the benchmark divides by
//! these. Both ignore any words after their keys, so that the benchmark
//! can also measure them with as many arguments as the command compared
//! (the server's share of a call grows with its arguments). `FLOOR.INT key` does `FLOOR.ONE`'s work keeping the value
//! integer-encoded, as built-in commands store integers: the module API can
//! only do that through `RedisModule_Call` (`GET`, then `SET ... PXAT`).
//! `FLOOR.TYPE key` does what `SW.ALLOW` cannot avoid beyond that: the key
//! holds a value of a module type (created when absent, changed in place
//! otherwise), gets an absolute expiry, and the change is replicated as a
//! module command with the time, as a log's effect must carry it so that
//! replicas decide as the master did (`FLOOR.TYPE key <ms>`); it replies
//! five integers, and ignores words after the key too.
//!
//! The API functions are resolved once at load, which fails if one is
//! missing, so the commands never meet a missing one.

use redis_module::native_types::RedisType;
use redis_module::{raw, redis_module, Context, RedisString, Status};
use std::os::raw::{c_char, c_int, c_void};
use std::sync::OnceLock;

/// The API functions the commands use, and the shared `PXAT` string.
struct Api {
    open_key: unsafe extern "C" fn(
        *mut raw::RedisModuleCtx,
        *mut raw::RedisModuleString,
        c_int,
    ) -> *mut raw::RedisModuleKey,
    close_key: unsafe extern "C" fn(*mut raw::RedisModuleKey),
    string_dma: unsafe extern "C" fn(*mut raw::RedisModuleKey, *mut usize, c_int) -> *mut c_char,
    string_truncate: unsafe extern "C" fn(*mut raw::RedisModuleKey, usize) -> c_int,
    set_abs_expire: unsafe extern "C" fn(*mut raw::RedisModuleKey, raw::mstime_t) -> c_int,
    replicate:
        unsafe extern "C" fn(*mut raw::RedisModuleCtx, *const c_char, *const c_char, ...) -> c_int,
    call: unsafe extern "C" fn(
        *mut raw::RedisModuleCtx,
        *const c_char,
        *const c_char,
        ...
    ) -> *mut raw::RedisModuleCallReply,
    call_reply_string:
        unsafe extern "C" fn(*mut raw::RedisModuleCallReply, *mut usize) -> *const c_char,
    free_call_reply: unsafe extern "C" fn(*mut raw::RedisModuleCallReply),
    reply_array: unsafe extern "C" fn(*mut raw::RedisModuleCtx, std::os::raw::c_long) -> c_int,
    reply_integer:
        unsafe extern "C" fn(*mut raw::RedisModuleCtx, std::os::raw::c_longlong) -> c_int,
    wrong_arity: unsafe extern "C" fn(*mut raw::RedisModuleCtx) -> c_int,
    reply_error: unsafe extern "C" fn(*mut raw::RedisModuleCtx, *const c_char) -> c_int,
    key_type: unsafe extern "C" fn(*mut raw::RedisModuleKey) -> c_int,
    get_value: unsafe extern "C" fn(*mut raw::RedisModuleKey) -> *mut c_void,
    set_value: unsafe extern "C" fn(
        *mut raw::RedisModuleKey,
        *mut raw::RedisModuleType,
        *mut c_void,
    ) -> c_int,
    /// The shared `PXAT` string, as an address (a static must be `Sync`).
    pxat: usize,
}

static API: OnceLock<Api> = OnceLock::new();

fn now_nanos() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec for the call.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// Writes `value` as `digits.len()` decimal digits.
fn put_digits(mut value: i64, digits: &mut [u8]) {
    for d in digits.iter_mut().rev() {
        *d = b'0' + (value % 10) as u8;
        value /= 10;
    }
}

fn parse_digits(digits: &[u8]) -> i64 {
    digits.iter().fold(0i64, |v, &d| {
        v.wrapping_mul(10)
            .wrapping_add(i64::from(d.wrapping_sub(b'0')))
    })
}

/// The next value: after `old` and now, kept to 19 digits.
fn next_value(old: i64, now: i64) -> i64 {
    old.max(now) % 9_000_000_000_000_000_000 + 1_000_000_000
}

/// Reads the 19-digit value of `name` (creating it), writes a new one in
/// place, sets an absolute expiry and replicates `SET name value PXAT ms`
/// with the cheapest arguments (a shared `PXAT`, the expiry as a buffer).
///
/// # Safety
///
/// `ctx` and `name` are the live context and an argument of the running
/// command.
unsafe fn touch(
    api: &Api,
    ctx: *mut raw::RedisModuleCtx,
    name: *mut raw::RedisModuleString,
    now: i64,
) {
    unsafe {
        let key = (api.open_key)(
            ctx,
            name,
            (raw::REDISMODULE_READ | raw::REDISMODULE_WRITE) as c_int,
        );
        let write = raw::REDISMODULE_WRITE as c_int;
        let mut len = 0usize;
        let mut ptr = (api.string_dma)(key, &mut len, write);
        if len != 19 {
            (api.string_truncate)(key, 19);
            ptr = (api.string_dma)(key, &mut len, write);
        }
        if ptr.is_null() || len != 19 {
            (api.close_key)(key);
            return;
        }
        let digits = std::slice::from_raw_parts_mut(ptr.cast::<u8>(), 19);
        put_digits(next_value(parse_digits(digits), now), digits);
        let expire_ms = now / 1_000_000 + 60_000;
        (api.set_abs_expire)(key, expire_ms);
        let mut ms = [0u8; 13];
        put_digits(expire_ms, &mut ms);
        (api.replicate)(
            ctx,
            c"SET".as_ptr(),
            c"sbsb".as_ptr(),
            name,
            ptr as *const c_char,
            19usize,
            api.pxat as *mut raw::RedisModuleString,
            ms.as_ptr() as *const c_char,
            ms.len(),
        );
        (api.close_key)(key);
    }
}

/// Replies `[0, 16, 15, -1, 2]`, and a sixth `1` when `n` is 6.
unsafe fn reply_integers(api: &Api, ctx: *mut raw::RedisModuleCtx, n: usize) {
    unsafe {
        (api.reply_array)(ctx, n as _);
        for v in [0, 16, 15, -1, 2, 1].into_iter().take(n) {
            (api.reply_integer)(ctx, v);
        }
    }
}

/// The common shape: check the arity (as Redis counts it: `-n` is at
/// least `n` words), then run `body` on the arguments.
fn command(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
    arity: c_int,
    body: unsafe fn(&Api, *mut raw::RedisModuleCtx, &[*mut raw::RedisModuleString]),
) -> c_int {
    let Some(api) = API.get() else {
        return raw::REDISMODULE_ERR as c_int;
    };
    // SAFETY: Redis passes `argc` valid arguments for the command's
    // duration; `body` gets them with the live context.
    unsafe {
        if argc != arity && !(arity < 0 && argc >= -arity) {
            return (api.wrong_arity)(ctx);
        }
        body(api, ctx, std::slice::from_raw_parts(argv, argc as usize));
    }
    raw::REDISMODULE_OK as c_int
}

unsafe fn one_body(api: &Api, ctx: *mut raw::RedisModuleCtx, args: &[*mut raw::RedisModuleString]) {
    unsafe {
        touch(api, ctx, args[1], now_nanos());
        reply_integers(api, ctx, 5);
    }
}

unsafe fn two_body(api: &Api, ctx: *mut raw::RedisModuleCtx, args: &[*mut raw::RedisModuleString]) {
    unsafe {
        let now = now_nanos();
        touch(api, ctx, args[1], now);
        touch(api, ctx, args[2], now);
        reply_integers(api, ctx, 6);
    }
}

/// The module type of `FLOOR.TYPE`: one integer, boxed.
static FLOOR_TYPE: RedisType = RedisType::new(
    "cellfloor",
    0,
    raw::RedisModuleTypeMethods {
        version: raw::REDISMODULE_TYPE_METHOD_VERSION as u64,
        rdb_load: Some(type_load),
        rdb_save: Some(type_save),
        free: Some(type_free),
        // SAFETY: every other field is an optional callback or a number,
        // for which all zeros is `None` or 0.
        ..unsafe { std::mem::zeroed() }
    },
);

unsafe extern "C" fn type_load(rdb: *mut raw::RedisModuleIO, _encver: c_int) -> *mut c_void {
    let value = raw::load_unsigned(rdb).unwrap_or(0) as i64;
    Box::into_raw(Box::new(value)).cast()
}

unsafe extern "C" fn type_save(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    // SAFETY: the server hands back a value made by this type.
    let value = unsafe { *value.cast::<i64>() };
    raw::save_unsigned(rdb, value as u64);
}

unsafe extern "C" fn type_free(value: *mut c_void) {
    // SAFETY: made by `Box::into_raw` in this module, freed once.
    drop(unsafe { Box::from_raw(value.cast::<i64>()) });
}

unsafe fn type_body(
    api: &Api,
    ctx: *mut raw::RedisModuleCtx,
    args: &[*mut raw::RedisModuleString],
) {
    unsafe {
        let now = now_nanos();
        let name = args[1];
        let key = (api.open_key)(
            ctx,
            name,
            (raw::REDISMODULE_READ | raw::REDISMODULE_WRITE) as c_int,
        );
        let ty = *FLOOR_TYPE.raw_type.borrow();
        let kind = (api.key_type)(key);
        if kind == raw::REDISMODULE_KEYTYPE_EMPTY as c_int {
            let value = Box::into_raw(Box::new(now));
            if (api.set_value)(key, ty, value.cast()) != raw::REDISMODULE_OK as c_int {
                drop(Box::from_raw(value));
                (api.close_key)(key);
                (api.reply_error)(ctx, c"ERR the value was not set".as_ptr());
                return;
            }
        } else if kind == raw::REDISMODULE_KEYTYPE_MODULE as c_int {
            let value = (api.get_value)(key).cast::<i64>();
            if !value.is_null() {
                *value = next_value(*value, now);
            }
        } else {
            (api.close_key)(key);
            (api.reply_error)(ctx, c"WRONGTYPE not a floor.type key".as_ptr());
            return;
        }
        (api.set_abs_expire)(key, now / 1_000_000 + 60_000);
        // The effect carries the time, as a log's must for replicas to
        // decide as this server did.
        let mut ms = [0u8; 13];
        put_digits(now / 1_000_000, &mut ms);
        (api.replicate)(
            ctx,
            c"FLOOR.TYPE".as_ptr(),
            c"sb".as_ptr(),
            name,
            ms.as_ptr() as *const c_char,
            ms.len(),
        );
        (api.close_key)(key);
        reply_integers(api, ctx, 5);
    }
}

unsafe fn int_body(api: &Api, ctx: *mut raw::RedisModuleCtx, args: &[*mut raw::RedisModuleString]) {
    unsafe {
        let now = now_nanos();
        let got = (api.call)(ctx, c"GET".as_ptr(), c"s".as_ptr(), args[1]);
        let mut len = 0usize;
        let ptr = if got.is_null() {
            std::ptr::null()
        } else {
            (api.call_reply_string)(got, &mut len)
        };
        let old = if ptr.is_null() {
            0
        } else {
            parse_digits(std::slice::from_raw_parts(ptr.cast::<u8>(), len))
        };
        if !got.is_null() {
            (api.free_call_reply)(got);
        }
        let mut digits = [0u8; 19];
        put_digits(next_value(old, now), &mut digits);
        let mut ms = [0u8; 13];
        put_digits(now / 1_000_000 + 60_000, &mut ms);
        // "!": the SET is replicated as it is.
        let set = (api.call)(
            ctx,
            c"SET".as_ptr(),
            c"!sbcb".as_ptr(),
            args[1],
            digits.as_ptr() as *const c_char,
            digits.len(),
            c"PXAT".as_ptr(),
            ms.as_ptr() as *const c_char,
            ms.len(),
        );
        if !set.is_null() {
            (api.free_call_reply)(set);
        }
        reply_integers(api, ctx, 5);
    }
}

extern "C" fn one(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    command(ctx, argv, argc, -2, one_body)
}

extern "C" fn two(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    command(ctx, argv, argc, -3, two_body)
}

extern "C" fn int(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    command(ctx, argv, argc, 2, int_body)
}

extern "C" fn typed(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    command(ctx, argv, argc, -2, type_body)
}

type Handler =
    extern "C" fn(*mut raw::RedisModuleCtx, *mut *mut raw::RedisModuleString, c_int) -> c_int;

/// Resolves the API the commands use; `None` if the server lacks a part.
fn resolve() -> Option<Api> {
    // SAFETY: the table is filled by RedisModule_Init before `init` runs
    // and never written again; a NULL context makes a string the module
    // owns for good.
    unsafe {
        let pxat = raw::RedisModule_CreateString?(std::ptr::null_mut(), c"PXAT".as_ptr(), 4);
        Some(Api {
            open_key: raw::RedisModule_OpenKey?,
            close_key: raw::RedisModule_CloseKey?,
            string_dma: raw::RedisModule_StringDMA?,
            string_truncate: raw::RedisModule_StringTruncate?,
            set_abs_expire: raw::RedisModule_SetAbsExpire?,
            replicate: raw::RedisModule_Replicate?,
            call: raw::RedisModule_Call?,
            call_reply_string: raw::RedisModule_CallReplyStringPtr?,
            free_call_reply: raw::RedisModule_FreeCallReply?,
            reply_array: raw::RedisModule_ReplyWithArray?,
            reply_integer: raw::RedisModule_ReplyWithLongLong?,
            wrong_arity: raw::RedisModule_WrongArity?,
            reply_error: raw::RedisModule_ReplyWithError?,
            key_type: raw::RedisModule_KeyType?,
            get_value: raw::RedisModule_ModuleTypeGetValue?,
            set_value: raw::RedisModule_ModuleTypeSetValue?,
            pxat: (!pxat.is_null()).then_some(pxat as usize)?,
        })
    }
}

fn init(ctx: &Context, _args: &[RedisString]) -> Status {
    let (Some(api), Some(create)) = (resolve(), api_create()) else {
        return Status::Err;
    };
    let _ = API.set(api);
    let flags = c"write deny-oom fast".as_ptr();
    let commands = [
        (c"floor.one", one as Handler, 1),
        (c"floor.two", two, 2),
        (c"floor.int", int, 1),
        (c"floor.type", typed, 1),
    ];
    for (name, handler, last) in commands {
        // SAFETY: during OnLoad, with NUL-terminated names and flags.
        let status = unsafe { create(ctx.ctx, name.as_ptr(), Some(handler), flags, 1, last, 1) };
        if status != raw::REDISMODULE_OK as c_int {
            return Status::Err;
        }
    }
    Status::Ok
}

/// `RedisModule_CreateCommand`, if the server has it.
fn api_create() -> Option<
    unsafe extern "C" fn(
        *mut raw::RedisModuleCtx,
        *const c_char,
        raw::RedisModuleCmdFunc,
        *const c_char,
        c_int,
        c_int,
        c_int,
    ) -> c_int,
> {
    // SAFETY: as in `resolve`.
    unsafe { raw::RedisModule_CreateCommand }
}

redis_module! {
    name: "cell-floor",
    version: 1,
    allocator: (redis_module::alloc::RedisAlloc, redis_module::alloc::RedisAlloc),
    data_types: [FLOOR_TYPE],
    init: init,
}
