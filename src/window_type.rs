//! The module data type holding `SW.ALLOW` state: how Redis saves, loads,
//! rewrites, copies, measures and frees it.

use cell_core::window_state::WindowState;
use redis_module::native_types::RedisType;
use redis_module::raw;
use std::os::raw::{c_char, c_int, c_void};

/// Shown by `TYPE key`. Redis requires exactly 9 characters.
pub const TYPE_NAME: &str = "cell-swin";
const ENCODING_VERSION: i32 = 0;

pub static WINDOW_TYPE: RedisType = RedisType::new(
    TYPE_NAME,
    ENCODING_VERSION,
    raw::RedisModuleTypeMethods {
        version: raw::REDISMODULE_TYPE_METHOD_VERSION as u64,
        rdb_load: Some(rdb_load),
        rdb_save: Some(rdb_save),
        aof_rewrite: Some(aof_rewrite),
        mem_usage: Some(mem_usage),
        digest: Some(digest),
        free: Some(free),
        aux_load: None,
        aux_save: None,
        aux_save2: None,
        aux_save_triggers: 0,
        free_effort: Some(free_effort),
        unlink: None,
        copy: Some(copy),
        defrag: None,
        copy2: None,
        free_effort2: None,
        mem_usage2: None,
        unlink2: None,
    },
);

/// Boxes a state for Redis to own.
fn into_raw(state: WindowState) -> *mut c_void {
    Box::into_raw(Box::new(state)).cast()
}

/// Loads a value from an RDB file or a `RESTORE` payload. The module
/// declares that it handles I/O errors: a short or damaged read sets the
/// I/O error flag instead of aborting the server, and returning NULL makes
/// the server refuse the payload (`ERR Bad data format`) or the file.
unsafe extern "C" fn rdb_load(rdb: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    if encver != ENCODING_VERSION {
        return std::ptr::null_mut();
    }
    // `load_string_buffer` checks the I/O error flag after the read.
    let Ok(buffer) = raw::load_string_buffer(rdb) else {
        return std::ptr::null_mut();
    };
    // Corrupt data is refused (Redis reports a bad RDB or RESTORE payload)
    // rather than loaded into an inconsistent log.
    match WindowState::decode(buffer.as_ref()) {
        Some(state) => into_raw(state),
        None => std::ptr::null_mut(),
    }
}

unsafe extern "C" fn rdb_save(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    // SAFETY: Redis only hands this type's callbacks values created by
    // `into_raw`, alive until `free`.
    let state = unsafe { &*value.cast::<WindowState>() };
    raw::save_slice(rdb, &state.encode());
}

unsafe extern "C" fn aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    // SAFETY: as in `rdb_save`.
    let state = unsafe { &*value.cast::<WindowState>() };
    let blob = state.encode();
    if let Some(emit) = api!(RedisModule_EmitAOF) {
        // SAFETY: the format "sb" matches a module string and a buffer with
        // its length; Redis copies both. The expiry is emitted by Redis.
        unsafe {
            emit(
                aof,
                c"SW.LOAD".as_ptr(),
                c"sb".as_ptr(),
                key,
                blob.as_ptr().cast::<c_char>(),
                blob.len(),
            )
        };
    }
}

/// Feeds `DEBUG DIGEST` the serialized state, so that equal windows on a
/// master and its replicas digest equally.
unsafe extern "C" fn digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    // SAFETY: as in `rdb_save`.
    let state = unsafe { &*value.cast::<WindowState>() };
    let blob = state.encode();
    if let (Some(add), Some(end)) = (
        api!(RedisModule_DigestAddStringBuffer),
        api!(RedisModule_DigestEndSequence),
    ) {
        // SAFETY: a live digest context and a buffer of `len` bytes.
        unsafe {
            add(md, blob.as_ptr().cast::<c_char>().cast_mut(), blob.len());
            end(md);
        }
    }
}

unsafe extern "C" fn mem_usage(value: *const c_void) -> usize {
    // SAFETY: as in `rdb_save`.
    let state = unsafe { &*value.cast::<WindowState>() };
    std::mem::size_of::<WindowState>() + state.heap_bytes()
}

/// The work of freeing a value: lets the server free large logs in the
/// background when lazy freeing is on.
unsafe extern "C" fn free_effort(_key: *mut raw::RedisModuleString, value: *const c_void) -> usize {
    // SAFETY: as in `rdb_save`.
    let state = unsafe { &*value.cast::<WindowState>() };
    state.free_effort()
}

unsafe extern "C" fn copy(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    // SAFETY: as in `rdb_save`.
    let state = unsafe { &*value.cast::<WindowState>() };
    into_raw(state.clone())
}

unsafe extern "C" fn free(value: *mut c_void) {
    // SAFETY: `value` came from `into_raw` and Redis frees it exactly once.
    drop(unsafe { Box::from_raw(value.cast::<WindowState>()) });
}
