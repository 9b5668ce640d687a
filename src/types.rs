//! The module's data types, `cell-swin` (`SW.ALLOW` state) and `cell-conc`
//! (`CC.*` leases): how the server saves, loads, rewrites, copies,
//! measures, digests and frees them. Both share these callbacks, over the
//! [`Stored`] trait their core values implement.

use cell_core::lease::Leases;
use cell_core::window_state::WindowState;
use redis_module::native_types::RedisType;
use redis_module::raw;
use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};

/// A value kept in a key of one of the module's types.
pub trait Stored: Clone + Sized {
    /// What an AOF rewrite emits for a key: `COMMAND key payload`.
    const LOAD_COMMAND: &'static CStr;
    fn encode(&self) -> Vec<u8>;
    /// Parses what `encode` wrote; anything else is `None`.
    fn decode(data: &[u8]) -> Option<Self>;
    fn heap_bytes(&self) -> usize;
    /// The work of freeing the value (lets the server free large ones in
    /// the background when lazy freeing is on).
    fn free_effort(&self) -> usize;
}

impl Stored for WindowState {
    const LOAD_COMMAND: &'static CStr = c"SW.LOAD";
    fn encode(&self) -> Vec<u8> {
        WindowState::encode(self)
    }
    fn decode(data: &[u8]) -> Option<Self> {
        WindowState::decode(data)
    }
    fn heap_bytes(&self) -> usize {
        WindowState::heap_bytes(self)
    }
    fn free_effort(&self) -> usize {
        WindowState::free_effort(self)
    }
}

impl Stored for Leases {
    const LOAD_COMMAND: &'static CStr = c"CC.LOAD";
    fn encode(&self) -> Vec<u8> {
        Leases::encode(self)
    }
    fn decode(data: &[u8]) -> Option<Self> {
        Leases::decode(data)
    }
    fn heap_bytes(&self) -> usize {
        Leases::heap_bytes(self)
    }
    fn free_effort(&self) -> usize {
        self.len().max(1)
    }
}

const ENCODING_VERSION: i32 = 0;

/// `SW.ALLOW` state. `TYPE key` shows the name; Redis requires 9 characters.
pub static WINDOW_TYPE: RedisType =
    RedisType::new("cell-swin", ENCODING_VERSION, methods::<WindowState>());

/// `CC.*` leases.
pub static LEASE_TYPE: RedisType =
    RedisType::new("cell-conc", ENCODING_VERSION, methods::<Leases>());

/// The methods of a type that has none: a type's own list them and take
/// the rest from here.
pub const NO_METHODS: raw::RedisModuleTypeMethods = raw::RedisModuleTypeMethods {
    version: raw::REDISMODULE_TYPE_METHOD_VERSION as u64,
    // SAFETY: every other field is an optional callback or a number, for
    // which all zeros is `None` or 0.
    ..unsafe { std::mem::zeroed() }
};

const fn methods<T: Stored>() -> raw::RedisModuleTypeMethods {
    raw::RedisModuleTypeMethods {
        rdb_load: Some(rdb_load::<T>),
        rdb_save: Some(rdb_save::<T>),
        aof_rewrite: Some(aof_rewrite::<T>),
        mem_usage: Some(mem_usage::<T>),
        digest: Some(digest::<T>),
        free: Some(free::<T>),
        free_effort: Some(free_effort::<T>),
        copy: Some(copy::<T>),
        ..NO_METHODS
    }
}

/// Boxes a value for the server to own.
fn into_raw<T>(value: T) -> *mut c_void {
    Box::into_raw(Box::new(value)).cast()
}

/// # Safety
///
/// `value` must be a `T` made by [`into_raw`] and not yet freed, as the
/// server guarantees for the values it hands a type's callbacks.
unsafe fn borrow<'a, T>(value: *const c_void) -> &'a T {
    // SAFETY: see above.
    unsafe { &*value.cast::<T>() }
}

/// Loads a value from an RDB file or a `RESTORE` payload. The module
/// declares that it handles I/O errors: a short or damaged read sets the
/// I/O error flag instead of aborting the server, and returning NULL makes
/// the server refuse the payload (`ERR Bad data format`) or the file.
unsafe extern "C" fn rdb_load<T: Stored>(
    rdb: *mut raw::RedisModuleIO,
    encver: c_int,
) -> *mut c_void {
    if encver != ENCODING_VERSION {
        return std::ptr::null_mut();
    }
    // `load_string_buffer` checks the I/O error flag after the read.
    let Ok(buffer) = raw::load_string_buffer(rdb) else {
        return std::ptr::null_mut();
    };
    // Data that does not decode to a consistent value is refused.
    match T::decode(buffer.as_ref()) {
        Some(value) => into_raw(value),
        None => std::ptr::null_mut(),
    }
}

unsafe extern "C" fn rdb_save<T: Stored>(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    // SAFETY: a value of this type (see `borrow`).
    let value = unsafe { borrow::<T>(value) };
    raw::save_slice(rdb, &value.encode());
}

unsafe extern "C" fn aof_rewrite<T: Stored>(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    // SAFETY: a value of this type (see `borrow`).
    let blob = unsafe { borrow::<T>(value) }.encode();
    if let Some(emit) = api!(RedisModule_EmitAOF) {
        // SAFETY: the format "sb" matches a module string and a buffer with
        // its length; Redis copies both. The expiry is emitted by Redis.
        unsafe {
            emit(
                aof,
                T::LOAD_COMMAND.as_ptr(),
                c"sb".as_ptr(),
                key,
                blob.as_ptr().cast::<c_char>(),
                blob.len(),
            )
        };
    }
}

/// Feeds `DEBUG DIGEST` the serialized value, so that equal values on a
/// master and its replicas digest equally.
unsafe extern "C" fn digest<T: Stored>(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    // SAFETY: a value of this type (see `borrow`).
    let blob = unsafe { borrow::<T>(value) }.encode();
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

unsafe extern "C" fn mem_usage<T: Stored>(value: *const c_void) -> usize {
    // SAFETY: a value of this type (see `borrow`).
    std::mem::size_of::<T>() + unsafe { borrow::<T>(value) }.heap_bytes()
}

unsafe extern "C" fn free_effort<T: Stored>(
    _key: *mut raw::RedisModuleString,
    value: *const c_void,
) -> usize {
    // SAFETY: a value of this type (see `borrow`).
    unsafe { borrow::<T>(value) }.free_effort()
}

unsafe extern "C" fn copy<T: Stored>(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    // SAFETY: a value of this type (see `borrow`).
    into_raw(unsafe { borrow::<T>(value) }.clone())
}

unsafe extern "C" fn free<T: Stored>(value: *mut c_void) {
    // SAFETY: `value` came from `into_raw` and Redis frees it exactly once.
    drop(unsafe { Box::from_raw(value.cast::<T>()) });
}
