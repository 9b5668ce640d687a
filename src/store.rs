//! The one place that talks to keys: opening, type checks, reading and
//! writing state with an absolute expiry, replicating the effect, and
//! telling the server what changed.
//!
//! The module runs with `REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED`:
//! a key is signalled as modified (for `WATCH` and client-side caching)
//! only when something was written to it, as built-in commands do, not
//! merely because it was opened for writing.

use crate::error::{self, CmdError};
use cell_core::decimal::{write_i64, DIGITS};
use redis_module::native_types::RedisType;
use redis_module::{raw, Context};
use std::cell::Cell;
use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicI64, AtomicPtr, Ordering};

/// `PXAT`, created once and shared by every replicated `SET`, so that
/// replicating a write allocates one argument object fewer.
static PXAT: AtomicPtr<raw::RedisModuleString> = AtomicPtr::new(std::ptr::null_mut());

/// `APPROX`, shared by every replicated `SW.RECORD ... APPROX` in the same
/// way.
static APPROX: AtomicPtr<raw::RedisModuleString> = AtomicPtr::new(std::ptr::null_mut());

/// A number replicated as an argument again and again (a window, the end
/// of an aligned window that every key shares), kept as one string owned
/// by the module: calls that replicate the same number share one argument
/// object instead of making one each. The string is made when a number
/// comes again within three sightings, so numbers that never repeat (a
/// TAT's expiry) cost nothing more than before, and do not displace one
/// that does (`CL.THROTTLEALL` with a GCRA and an aligned fixed window
/// alternates the two). Commands run on the main thread, one at a time:
/// relaxed atomics make the statics shareable.
struct SharedNumber {
    string: AtomicPtr<raw::RedisModuleString>,
    /// The number `string` holds.
    value: AtomicI64,
    /// The two numbers seen last, the latest first.
    seen: [AtomicI64; 2],
}

impl SharedNumber {
    const fn new() -> Self {
        Self {
            string: AtomicPtr::new(std::ptr::null_mut()),
            value: AtomicI64::new(0),
            seen: [AtomicI64::new(i64::MIN), AtomicI64::new(i64::MIN)],
        }
    }

    /// The shared string of `n`, if it is the one kept or one of the two
    /// seen last (and the server made its string). Replicated arguments
    /// take their own reference, so the string it replaces is released
    /// here without touching what was replicated with it.
    fn get(&self, n: i64) -> Option<*mut raw::RedisModuleString> {
        let current = self.string.load(Ordering::Relaxed);
        if !current.is_null() && self.value.load(Ordering::Relaxed) == n {
            return Some(current);
        }
        let latest = self.seen[0].swap(n, Ordering::Relaxed);
        if latest != n {
            let before = self.seen[1].swap(latest, Ordering::Relaxed);
            if before != n {
                return None;
            }
        }
        let (create, free) = (
            api!(RedisModule_CreateString)?,
            api!(RedisModule_FreeString)?,
        );
        let mut digits = [0u8; DIGITS];
        let text = write_i64(n, &mut digits);
        // SAFETY: a NULL context makes a string owned by the module; `text`
        // is `len` readable bytes, copied.
        let made = unsafe {
            create(
                std::ptr::null_mut(),
                text.as_ptr().cast::<c_char>(),
                text.len(),
            )
        };
        if made.is_null() {
            return None;
        }
        if !current.is_null() {
            // SAFETY: made here with a NULL context, released once: this
            // holds it no more.
            unsafe { free(std::ptr::null_mut(), current) };
        }
        self.string.store(made, Ordering::Relaxed);
        self.value.store(n, Ordering::Relaxed);
        Some(made)
    }
}

/// The window of replicated window effects (`SW.RECORD`).
static WINDOW: SharedNumber = SharedNumber::new();
/// The expiry of replicated `SET`s.
static EXPIRY: SharedNumber = SharedNumber::new();

/// Creates the shared strings; called once at load.
pub fn init() {
    if let Some(create) = api!(RedisModule_CreateString) {
        for (shared, word) in [(&PXAT, c"PXAT"), (&APPROX, c"APPROX")] {
            // SAFETY: a NULL context creates a string owned by the module
            // that lives until freed, which it never is.
            let s = unsafe { create(std::ptr::null_mut(), word.as_ptr(), word.count_bytes()) };
            shared.store(s, Ordering::Relaxed);
        }
    }
}

/// How a command uses a key.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read-only commands: nothing about the key may change, not even the
    /// encoding of its value.
    Read,
    /// Commands that may write.
    Write,
}

/// What a key holds, as far as the module is concerned.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Holds {
    Nothing,
    String,
    /// A value of one of this module's types (`cell-swin`, `cell-ccl`).
    Module(*mut raw::RedisModuleType),
    Other,
}

/// An argument of a replicated effect, after the key.
pub enum Arg<'a> {
    Int(i64),
    Bytes(&'a [u8]),
    Word(&'static CStr),
}

/// An open key, closed on drop (and signalled as modified then, if
/// anything was written).
pub struct Key {
    ctx: *mut raw::RedisModuleCtx,
    name: *mut raw::RedisModuleString,
    inner: *mut raw::RedisModuleKey,
    access: Access,
    written: bool,
    /// The name was created for this key (a derived key, not an argument)
    /// and is freed with it.
    owned: bool,
    /// What the key holds, once asked: a command that decides, then writes,
    /// asks twice. Every write through this key forgets it, and no other
    /// handle writes the key while this one is open (a command opens each
    /// key once: `CL.THROTTLEALL` refuses a key named twice).
    holds: Cell<Option<Holds>>,
}

impl Key {
    /// Opens `name` for reading, or for reading and writing.
    pub fn open(ctx: &Context, name: *mut raw::RedisModuleString, access: Access) -> Self {
        let mode = match access {
            Access::Write => raw::KeyMode::READ | raw::KeyMode::WRITE,
            Access::Read => raw::KeyMode::READ,
        };
        let inner = raw::open_key(ctx.ctx, name, mode);
        Self {
            ctx: ctx.ctx,
            name,
            inner,
            access,
            written: false,
            owned: false,
            holds: Cell::new(None),
        }
    }

    /// Opens a key whose name is not one of the command's arguments (a
    /// policy trial's key): the name is created here and freed on drop.
    pub fn open_derived(ctx: &Context, name: &[u8], access: Access) -> Result<Self, CmdError> {
        let create = api!(RedisModule_CreateString).ok_or(error::INTERNAL)?;
        // SAFETY: `name` is `len` readable bytes; the string is owned by
        // the module until freed in `drop`.
        let s = unsafe { create(ctx.ctx, name.as_ptr().cast::<c_char>(), name.len()) };
        if s.is_null() {
            return Err(error::INTERNAL);
        }
        let mut key = Self::open(ctx, s, access);
        key.owned = true;
        Ok(key)
    }

    /// What the key holds.
    pub fn holds(&self) -> Holds {
        if let Some(holds) = self.holds.get() {
            return holds;
        }
        let holds = self.ask_holds();
        self.holds.set(Some(holds));
        holds
    }

    fn ask_holds(&self) -> Holds {
        if self.inner.is_null() {
            return Holds::Nothing;
        }
        let Some(key_type) = api!(RedisModule_KeyType) else {
            return Holds::Nothing;
        };
        // SAFETY: `inner` is a key opened by `open` and not yet closed.
        match raw::KeyType::from(unsafe { key_type(self.inner) }) {
            raw::KeyType::Empty => Holds::Nothing,
            raw::KeyType::String => Holds::String,
            raw::KeyType::Module => match api!(RedisModule_ModuleTypeGetType) {
                // SAFETY: the key is open and holds a module value.
                Some(get_type) => Holds::Module(unsafe { get_type(self.inner) }),
                None => Holds::Other,
            },
            _ => Holds::Other,
        }
    }

    /// A string key holding a signed 64-bit integer: `None` if the key
    /// does not exist, `invalid` when the string is anything else, and
    /// WRONGTYPE for any other type.
    ///
    /// Reading never changes the stored value. The key API reads strings
    /// through direct memory access, which turns an `int`- or
    /// `embstr`-encoded value into a `raw` one; on a key opened for
    /// writing that is what the module's own writes leave (and what the
    /// write that usually follows needs), but a read-only command asks the
    /// server with `GET` instead, so that a peek changes nothing.
    #[inline]
    pub fn integer(&self, invalid: CmdError) -> Result<Option<i64>, CmdError> {
        match self.holds() {
            Holds::Nothing => return Ok(None),
            Holds::String => {}
            _ => return Err(error::WRONG_TYPE),
        }
        let parse = |bytes: &[u8]| {
            cell_core::parse::integer(bytes)
                .map(Some)
                .map_err(|_| invalid)
        };
        match self.access {
            Access::Write => {
                let mut len: libc::size_t = 0;
                let ptr = raw::string_dma(self.inner, &mut len, raw::KeyMode::READ);
                if ptr.is_null() {
                    return Err(error::WRONG_TYPE);
                }
                // SAFETY: Redis returns `len` readable bytes owned by the
                // key, valid until it is modified or closed, which cannot
                // happen while this borrow of `self` lasts.
                parse(unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) })
            }
            Access::Read => self.get_without_touching(parse),
        }
    }

    /// Reads the string value through `GET`, which leaves the stored object
    /// as it is.
    fn get_without_touching<T>(
        &self,
        parse: impl FnOnce(&[u8]) -> Result<T, CmdError>,
    ) -> Result<T, CmdError> {
        let (Some(call), Some(string_ptr), Some(free)) = (
            api!(RedisModule_Call),
            api!(RedisModule_CallReplyStringPtr),
            api!(RedisModule_FreeCallReply),
        ) else {
            return Err(error::INTERNAL);
        };
        // SAFETY: "s" matches one module string, the key name, which lives
        // for the command; the reply is freed below on every path.
        let reply = unsafe { call(self.ctx, c"GET".as_ptr(), c"s".as_ptr(), self.name) };
        if reply.is_null() {
            return Err(error::INTERNAL);
        }
        let mut len: libc::size_t = 0;
        // SAFETY: `reply` is a live call reply; for a bulk string Redis
        // returns `len` bytes it owns until the reply is freed.
        let ptr = unsafe { string_ptr(reply, &mut len) };
        let result = if ptr.is_null() {
            Err(error::WRONG_TYPE)
        } else {
            // SAFETY: see above; the slice does not outlive the reply.
            parse(unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) })
        };
        // SAFETY: a reply returned by RedisModule_Call, freed once.
        unsafe { free(reply) };
        result
    }

    /// Stores `value` as a string expiring at `expire_at_ms` (Unix ms),
    /// fires the keyspace event `event` (and `expire`), and replicates the
    /// write as `SET key value PXAT expire_at_ms` so that replicas and the
    /// AOF hold the same value and the same absolute expiry as this server.
    /// `current_expire_ms` is the key's expiry when the caller read it; an
    /// unchanged expiry is not written again (two dictionary lookups saved).
    pub fn set_integer_expiring_at(
        &mut self,
        value: i64,
        expire_at_ms: i64,
        current_expire_ms: Option<i64>,
        event: &'static CStr,
    ) -> Result<(), CmdError> {
        let mut buf = [0u8; DIGITS];
        let text = write_i64(value, &mut buf);
        self.overwrite_string(text)?;
        self.notify(raw::NotifyEvent::STRING, event);
        if current_expire_ms != Some(expire_at_ms) {
            self.set_abs_expire(expire_at_ms)?;
        }
        let pxat = PXAT.load(Ordering::Relaxed);
        match api!(RedisModule_Replicate) {
            // The shared PXAT string (and expiry, when the number repeats)
            // saves the server an allocation each.
            Some(replicate) if !pxat.is_null() => {
                if let Some(ms) = EXPIRY.get(expire_at_ms) {
                    // SAFETY: the format matches the arguments: a module
                    // string, a buffer with its length, two module
                    // strings; Redis takes its own references or copies.
                    unsafe {
                        replicate(
                            self.ctx,
                            c"SET".as_ptr(),
                            c"sbss".as_ptr(),
                            self.name,
                            text.as_ptr().cast::<c_char>(),
                            text.len(),
                            pxat,
                            ms,
                        );
                    }
                    return Ok(());
                }
                let mut ms = [0u8; DIGITS];
                let ms = write_i64(expire_at_ms, &mut ms);
                // SAFETY: the format matches the arguments: a module
                // string, a buffer with its length, a module string and a
                // buffer; Redis takes its own references or copies.
                unsafe {
                    replicate(
                        self.ctx,
                        c"SET".as_ptr(),
                        c"sbsb".as_ptr(),
                        self.name,
                        text.as_ptr().cast::<c_char>(),
                        text.len(),
                        pxat,
                        ms.as_ptr().cast::<c_char>(),
                        ms.len(),
                    );
                }
            }
            _ => self.replicate(
                c"SET",
                &[Arg::Bytes(text), Arg::Word(c"PXAT"), Arg::Int(expire_at_ms)],
            ),
        }
        Ok(())
    }

    /// Replaces the string value through direct memory access: in place
    /// when the length is unchanged (the common case for a TAT), resized
    /// otherwise; an absent key is created.
    fn overwrite_string(&mut self, text: &[u8]) -> Result<(), CmdError> {
        self.written = true;
        self.holds.set(None);
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

    /// Sets the key's absolute expiry (Unix ms) and fires `expire`; the
    /// caller replicates it (as part of a `SET ... PXAT` or a module
    /// effect), or calls [`Key::expire_at`].
    pub fn set_abs_expire(&mut self, expire_at_ms: i64) -> Result<(), CmdError> {
        self.written = true;
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

    /// Sets an absolute expiry and replicates it as `PEXPIREAT`.
    pub fn expire_at(&mut self, expire_at_ms: i64) -> Result<(), CmdError> {
        self.set_abs_expire(expire_at_ms)?;
        self.replicate(c"PEXPIREAT", &[Arg::Int(expire_at_ms)]);
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

    /// The value of this key if it holds one of type `ty` (whose values are
    /// `T`s made by `Box::into_raw`): `None` when the key does not exist,
    /// WRONGTYPE when it holds anything else.
    pub fn value<T>(&mut self, ty: &RedisType) -> Result<Option<&mut T>, CmdError> {
        match self.holds() {
            Holds::Nothing => Ok(None),
            Holds::Module(t) if t == *ty.raw_type.borrow() => {
                let get_value = api!(RedisModule_ModuleTypeGetValue).ok_or(error::INTERNAL)?;
                // SAFETY: values of this type are `T`s created by
                // `Box::into_raw`; the key is open for the whole borrow of
                // `self`, and Redis runs commands one at a time.
                let value = unsafe { get_value(self.inner) }.cast::<T>();
                Ok(unsafe { value.as_mut() })
            }
            _ => Err(error::WRONG_TYPE),
        }
    }

    /// Stores a new value of type `ty` in this (empty or same-type) key.
    pub fn set_value<T>(&mut self, ty: &RedisType, value: T) -> Result<&mut T, CmdError> {
        let set_value = api!(RedisModule_ModuleTypeSetValue).ok_or(error::INTERNAL)?;
        self.written = true;
        self.holds.set(None);
        let ptr = Box::into_raw(Box::new(value)).cast::<c_void>();
        // SAFETY: the key is open for writing; on success Redis owns `ptr`
        // and frees it through the type's `free` callback.
        let status = unsafe { set_value(self.inner, *ty.raw_type.borrow(), ptr) };
        if status != raw::Status::Ok as c_int {
            // SAFETY: Redis did not take ownership.
            drop(unsafe { Box::from_raw(ptr.cast::<T>()) });
            return Err(error::INTERNAL);
        }
        self.value(ty)?.ok_or(error::INTERNAL)
    }

    /// Replaces the value of this (empty or same-type) key with `value` of
    /// type `ty`, expiring at `expire_at_ms`, and fires `event`; without an
    /// expiry (an empty value) the key is deleted instead, replicated as
    /// `DEL`. What `SW.LOAD` and `CC.LOAD` do. Returns whether the key was
    /// kept. Every check (the key's type, an expiry the server takes) comes
    /// before the first write: on error the key is as it was.
    pub fn load<T>(
        &mut self,
        ty: &RedisType,
        value: T,
        expire_at_ms: Option<i64>,
        event: &'static CStr,
    ) -> Result<bool, CmdError> {
        // The server takes no negative expiry, and reads -1 as "none".
        if expire_at_ms.is_some_and(|ms| ms < 0) {
            return Err(error::INTERNAL);
        }
        let existing = self.value::<T>(ty)?;
        let Some(expire_at_ms) = expire_at_ms else {
            self.delete(true)?;
            return Ok(false);
        };
        match existing {
            Some(slot) => *slot = value,
            None => {
                self.set_value(ty, value)?;
            }
        }
        self.changed();
        self.notify(raw::NotifyEvent::MODULE, event);
        self.set_abs_expire(expire_at_ms)?;
        Ok(true)
    }

    /// Records that the caller changed the value in place (through
    /// [`Key::value`]).
    pub fn changed(&mut self) {
        self.written = true;
    }

    /// Deletes the key and fires `del`; replicates `DEL` when `replicate`
    /// (not when the command's own effect is replicated instead).
    pub fn delete(&mut self, replicate: bool) -> Result<(), CmdError> {
        if self.holds() == Holds::Nothing {
            return Ok(());
        }
        let delete = api!(RedisModule_DeleteKey).ok_or(error::INTERNAL)?;
        self.written = true;
        self.holds.set(None);
        // SAFETY: the key is open for writing.
        if unsafe { delete(self.inner) } != raw::Status::Ok as c_int {
            return Err(error::INTERNAL);
        }
        self.notify(raw::NotifyEvent::GENERIC, c"del");
        if replicate {
            self.replicate(c"DEL", &[]);
        }
        Ok(())
    }

    /// Replicates `command key args...` as an effect (at most four
    /// arguments). Every argument goes as a buffer, numbers formatted here:
    /// the server then makes one string object of each, where a `long long`
    /// argument costs it two allocations.
    pub fn replicate(&self, command: &CStr, args: &[Arg]) {
        const FORMATS: [&CStr; 5] = [c"s", c"sb", c"sbb", c"sbbb", c"sbbbb"];
        let Some(replicate) = api!(RedisModule_Replicate) else {
            return;
        };
        let n = args.len().min(4);
        let mut numbers = [[0u8; DIGITS]; 4];
        let mut spans = [(0usize, 0usize); 4];
        for (i, arg) in args.iter().take(n).enumerate() {
            if let Arg::Int(v) = arg {
                let len = write_i64(*v, &mut numbers[i]).len();
                spans[i] = (DIGITS - len, len);
            }
        }
        let part = |i: usize| -> &[u8] {
            match args.get(i) {
                Some(Arg::Int(_)) => &numbers[i][spans[i].0..spans[i].0 + spans[i].1],
                Some(Arg::Bytes(b)) => b,
                Some(Arg::Word(w)) => w.to_bytes(),
                None => &[],
            }
        };
        let [a, b, c, d] = [part(0), part(1), part(2), part(3)];
        // SAFETY: the format names the key and `n` buffers, passed as
        // pointer and length pairs in order; Redis ignores variadic
        // arguments the format does not name, and copies what it keeps.
        unsafe {
            replicate(
                self.ctx,
                command.as_ptr(),
                FORMATS[n].as_ptr(),
                self.name,
                a.as_ptr().cast::<c_char>(),
                a.len(),
                b.as_ptr().cast::<c_char>(),
                b.len(),
                c.as_ptr().cast::<c_char>(),
                c.len(),
                d.as_ptr().cast::<c_char>(),
                d.len(),
            );
        }
    }

    /// Replicates a window effect, `command key window_ns at_ns [APPROX]`
    /// (quantity 1), with the window and `APPROX` as shared strings; any
    /// other form through [`Key::replicate`].
    pub fn replicate_window(
        &self,
        command: &CStr,
        window: i64,
        at: i64,
        quantity: i64,
        approx: bool,
    ) {
        let approx_word = APPROX.load(Ordering::Relaxed);
        let shared = match (api!(RedisModule_Replicate), WINDOW.get(window)) {
            (Some(replicate), Some(window)) if quantity == 1 && !approx_word.is_null() => {
                Some((replicate, window))
            }
            _ => None,
        };
        let Some((replicate, window_word)) = shared else {
            let mut args = [
                Arg::Int(window),
                Arg::Int(at),
                Arg::Int(quantity),
                Arg::Word(c""),
            ];
            let mut n = 2;
            if quantity != 1 {
                n += 1;
            }
            if approx {
                args[n] = Arg::Word(c"APPROX");
                n += 1;
            }
            return self.replicate(command, &args[..n]);
        };
        let mut digits = [0u8; DIGITS];
        let at = write_i64(at, &mut digits);
        let format = if approx { c"ssbs" } else { c"ssb" };
        // SAFETY: the format names the key, the shared window, `at` as a
        // pointer and length and (with APPROX) the shared word; Redis takes
        // its own references to the strings and copies the buffer, and
        // ignores the last argument when the format does not name it.
        unsafe {
            replicate(
                self.ctx,
                command.as_ptr(),
                format.as_ptr(),
                self.name,
                window_word,
                at.as_ptr().cast::<c_char>(),
                at.len(),
                approx_word,
            );
        }
    }

    /// Fires a keyspace notification for this key, as a built-in command
    /// writing it would.
    pub fn notify(&self, class: raw::NotifyEvent, event: &'static CStr) {
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
        if self.written {
            if let Some(signal) = api!(RedisModule_SignalModifiedKey) {
                // SAFETY: the context and key name are valid for the command.
                unsafe { signal(self.ctx, self.name) };
            }
        }
        if self.owned {
            if let Some(free) = api!(RedisModule_FreeString) {
                // SAFETY: created by `open_derived` with this context, freed
                // once, after its last use above.
                unsafe { free(self.ctx, self.name) };
            }
        }
    }
}
