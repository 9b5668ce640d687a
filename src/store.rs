//! The one place that talks to keys: opening, type checks, reading and
//! writing string state with an absolute expiry, replicating the effect.

use crate::error::{self, CmdError};
use crate::window_type::{self, WINDOW_TYPE};
use cell_core::window_state::WindowState;
use redis_module::{raw, Context};
use std::os::raw::{c_char, c_int};
use std::sync::atomic::{AtomicPtr, Ordering};

/// `PXAT`, created once and shared by every replicated `SET`, so that
/// replicating a write allocates one argument object fewer.
static PXAT: AtomicPtr<raw::RedisModuleString> = AtomicPtr::new(std::ptr::null_mut());

/// Creates the shared strings; called once at load.
pub fn init() {
    if let Some(create) = api!(RedisModule_CreateString) {
        // SAFETY: a NULL context creates a string owned by the module that
        // lives until freed, which it never is.
        let s = unsafe { create(std::ptr::null_mut(), c"PXAT".as_ptr(), 4) };
        PXAT.store(s, Ordering::Relaxed);
    }
}

/// An open key, closed on drop.
pub struct Key {
    ctx: *mut raw::RedisModuleCtx,
    name: *mut raw::RedisModuleString,
    inner: *mut raw::RedisModuleKey,
    write: bool,
}

impl Key {
    /// Opens `name` for reading, or for reading and writing.
    pub fn open(ctx: &Context, name: *mut raw::RedisModuleString, write: bool) -> Self {
        let mode = if write {
            raw::KeyMode::READ | raw::KeyMode::WRITE
        } else {
            raw::KeyMode::READ
        };
        let inner = raw::open_key(ctx.ctx, name, mode);
        Self {
            ctx: ctx.ctx,
            name,
            inner,
            write,
        }
    }

    fn key_type(&self) -> raw::KeyType {
        if self.inner.is_null() {
            return raw::KeyType::Empty;
        }
        match api!(RedisModule_KeyType) {
            // SAFETY: `inner` is a key opened by `open` and not yet closed.
            Some(key_type) => unsafe { key_type(self.inner) }.into(),
            None => raw::KeyType::Empty,
        }
    }

    /// The bytes of a string key, `None` if the key does not exist, and
    /// WRONGTYPE for any other type. On a key opened for writing, the value
    /// is made a private raw string once, so that later writes update it in
    /// place without allocating or looking the key up again.
    pub fn string(&self) -> Result<Option<&[u8]>, CmdError> {
        match self.key_type() {
            raw::KeyType::Empty => Ok(None),
            raw::KeyType::String => {
                let mut len: libc::size_t = 0;
                let mode = if self.write {
                    raw::KeyMode::WRITE
                } else {
                    raw::KeyMode::READ
                };
                let ptr = raw::string_dma(self.inner, &mut len, mode);
                if ptr.is_null() {
                    return Err(error::WRONG_TYPE);
                }
                // SAFETY: Redis returns `len` readable bytes owned by the key,
                // valid until the key is modified or closed; the borrow of
                // `self` prevents both while the slice lives.
                Ok(Some(unsafe {
                    std::slice::from_raw_parts(ptr.cast::<u8>(), len)
                }))
            }
            _ => Err(error::WRONG_TYPE),
        }
    }

    /// A string key holding a signed 64-bit integer; `invalid` when the
    /// string is anything else.
    pub fn integer(&self, invalid: CmdError) -> Result<Option<i64>, CmdError> {
        match self.string()? {
            None => Ok(None),
            Some(bytes) => cell_core::parse::integer(bytes)
                .map(Some)
                .map_err(|_| invalid),
        }
    }

    /// Stores `value` as a string expiring at `expire_at_ms` (Unix ms),
    /// fires the keyspace event a `SET` would, and replicates the write as
    /// `SET key value PXAT expire_at_ms` so that replicas and the AOF hold
    /// the same value and the same absolute expiry as this server.
    /// `current_expire_ms` is the key's expiry when the caller read it; an
    /// unchanged expiry is not written again (two dictionary lookups saved).
    pub fn set_integer_expiring_at(
        &self,
        value: i64,
        expire_at_ms: i64,
        current_expire_ms: Option<i64>,
        event: &'static std::ffi::CStr,
    ) -> Result<(), CmdError> {
        let mut buf = itoa_buf();
        let text = format_i64(value, &mut buf);
        self.overwrite_string(text)?;
        self.notify(raw::NotifyEvent::STRING, event);
        if current_expire_ms != Some(expire_at_ms) {
            self.set_abs_expire(expire_at_ms)?;
        }
        if let Some(replicate) = api!(RedisModule_Replicate) {
            // The shared PXAT string when it exists, a C string otherwise:
            // the write is replicated either way.
            let pxat = PXAT.load(Ordering::Relaxed);
            let (fmt, pxat) = if pxat.is_null() {
                (c"sbcl", c"PXAT".as_ptr().cast_mut().cast())
            } else {
                (c"sbsl", pxat)
            };
            // SAFETY: the format matches the arguments: a module string, a
            // buffer with its length, a module string (or C string) and a
            // long long; Redis takes its own references or copies.
            unsafe {
                replicate(
                    self.ctx,
                    c"SET".as_ptr(),
                    fmt.as_ptr(),
                    self.name,
                    text.as_ptr().cast::<c_char>(),
                    text.len(),
                    pxat,
                    expire_at_ms as libc::c_longlong,
                );
            }
        }
        Ok(())
    }

    /// Replaces the string value through direct memory access: in place
    /// when the length is unchanged (the common case for a TAT), resized
    /// otherwise; an absent key is created.
    fn overwrite_string(&self, text: &[u8]) -> Result<(), CmdError> {
        let mut len: libc::size_t = 0;
        let mut ptr = raw::string_dma(self.inner, &mut len, raw::KeyMode::WRITE);
        if ptr.is_null() || len != text.len() {
            if raw::string_truncate(self.inner, text.len()) != raw::Status::Ok {
                return Err(error::INTERNAL);
            }
            ptr = raw::string_dma(self.inner, &mut len, raw::KeyMode::WRITE);
        }
        if ptr.is_null() || len != text.len() {
            return Err(error::INTERNAL);
        }
        // SAFETY: Redis returned `len` writable bytes owned by the key, which
        // stays open and unmodified by anything else during this copy.
        unsafe { std::ptr::copy_nonoverlapping(text.as_ptr(), ptr.cast::<u8>(), len) };
        Ok(())
    }

    /// Sets the key's absolute expiry (Unix ms) and fires `expire`.
    pub fn set_abs_expire(&self, expire_at_ms: i64) -> Result<(), CmdError> {
        let status = if let Some(set_abs) = api!(RedisModule_SetAbsExpire) {
            // SAFETY: the key is open for writing and holds a value.
            unsafe { set_abs(self.inner, expire_at_ms) }
        } else {
            // Servers before 6.2.2 only take a relative expiry.
            let now_ms = api!(RedisModule_Milliseconds)
                // SAFETY: a plain clock read with no arguments.
                .map(|ms| unsafe { ms() })
                .unwrap_or(0);
            raw::set_expire(self.inner, expire_at_ms.saturating_sub(now_ms).max(0)) as c_int
        };
        if status != raw::Status::Ok as c_int {
            return Err(error::INTERNAL);
        }
        // As `SET ... PXAT` and `PEXPIREAT` do.
        self.notify(raw::NotifyEvent::GENERIC, c"expire");
        Ok(())
    }

    /// The key's absolute expiry in Unix milliseconds, `None` without TTL.
    pub fn abs_expire(&self) -> Option<i64> {
        let ms = if let Some(get_abs) = api!(RedisModule_GetAbsExpire) {
            // SAFETY: the key is open.
            unsafe { get_abs(self.inner) }
        } else {
            let get = api!(RedisModule_GetExpire)?;
            let now = api!(RedisModule_Milliseconds)?;
            // SAFETY: the key is open; the clock read takes no arguments.
            let ttl = unsafe { get(self.inner) };
            if ttl < 0 {
                ttl
            } else {
                // SAFETY: a plain clock read.
                ttl.saturating_add(unsafe { now() })
            }
        };
        (ms >= 0).then_some(ms)
    }

    /// The sliding window state of this key: `None` when the key does not
    /// exist, WRONGTYPE when it holds anything else.
    pub fn window(&mut self) -> Result<Option<&mut WindowState>, CmdError> {
        match self.key_type() {
            raw::KeyType::Empty => Ok(None),
            raw::KeyType::Module => {
                let get_type = api!(RedisModule_ModuleTypeGetType).ok_or(error::INTERNAL)?;
                let get_value = api!(RedisModule_ModuleTypeGetValue).ok_or(error::INTERNAL)?;
                // SAFETY: the key is open and holds a module value.
                if unsafe { get_type(self.inner) } != *WINDOW_TYPE.raw_type.borrow() {
                    return Err(error::WRONG_TYPE);
                }
                // SAFETY: values of this type are `WindowState`s created by
                // `window_type::into_raw`; the key is open for the whole
                // borrow of `self`, and Redis runs commands one at a time.
                let value = unsafe { get_value(self.inner) }.cast::<WindowState>();
                Ok(unsafe { value.as_mut() })
            }
            _ => Err(error::WRONG_TYPE),
        }
    }

    /// Stores a new sliding window state in this (empty or same-type) key.
    pub fn set_window(&mut self, state: WindowState) -> Result<&mut WindowState, CmdError> {
        let set_value = api!(RedisModule_ModuleTypeSetValue).ok_or(error::INTERNAL)?;
        let ptr = window_type::into_raw(state);
        // SAFETY: the key is open for writing; on success Redis owns `ptr`
        // and frees it through the type's `free` callback.
        let status = unsafe { set_value(self.inner, *WINDOW_TYPE.raw_type.borrow(), ptr) };
        if status != raw::Status::Ok as c_int {
            // SAFETY: Redis did not take ownership.
            drop(unsafe { Box::from_raw(ptr.cast::<WindowState>()) });
            return Err(error::INTERNAL);
        }
        self.window()?.ok_or(error::INTERNAL)
    }

    /// Replicates an `SW.RECORD` effect: the request recorded at `at` with
    /// the master's clock.
    pub fn replicate_sw_record(&self, window: i64, at: i64, quantity: i64, approx: bool) {
        let Some(replicate) = api!(RedisModule_Replicate) else {
            return;
        };
        let (fmt, flag) = if approx {
            (c"slllc", c"APPROX")
        } else {
            (c"slll", c"")
        };
        // SAFETY: the format matches the arguments (a module string, three
        // long longs, and a C string that "slll" ignores).
        unsafe {
            replicate(
                self.ctx,
                c"SW.RECORD".as_ptr(),
                fmt.as_ptr(),
                self.name,
                window as libc::c_longlong,
                at as libc::c_longlong,
                quantity as libc::c_longlong,
                flag.as_ptr(),
            );
        }
    }

    /// Sets an absolute expiry and replicates it as `PEXPIREAT`.
    pub fn expire_at(&self, expire_at_ms: i64) -> Result<(), CmdError> {
        self.set_abs_expire(expire_at_ms)?;
        if let Some(replicate) = api!(RedisModule_Replicate) {
            // SAFETY: "sl" matches a module string and a long long.
            unsafe {
                replicate(
                    self.ctx,
                    c"PEXPIREAT".as_ptr(),
                    c"sl".as_ptr(),
                    self.name,
                    expire_at_ms as libc::c_longlong,
                );
            }
        }
        Ok(())
    }

    /// Fires a keyspace notification for this key, as a built-in command
    /// writing it would.
    pub fn notify(&self, class: raw::NotifyEvent, event: &'static std::ffi::CStr) {
        if let Some(notify) = api!(RedisModule_NotifyKeyspaceEvent) {
            // SAFETY: the context and the key name (a command argument) are
            // valid during the command; Redis copies what it keeps.
            unsafe { notify(self.ctx, class.bits(), event.as_ptr(), self.name) };
        }
    }
}

impl Drop for Key {
    fn drop(&mut self) {
        if !self.inner.is_null() {
            raw::close_key(self.inner);
        }
    }
}

/// Room for the longest i64 in decimal.
fn itoa_buf() -> [u8; 20] {
    [0; 20]
}

/// Formats `v` in decimal into `buf` without allocating.
fn format_i64(v: i64, buf: &mut [u8; 20]) -> &[u8] {
    let mut n = v.unsigned_abs();
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        i -= 1;
        buf[i] = b'-';
    }
    &buf[i..]
}
