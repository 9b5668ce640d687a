//! The one clock the module reads: the wall clock, in nanoseconds since the
//! Unix epoch. Read once per command so that a command's decision, its stored
//! state and its replicated effect all agree on the instant.

use std::os::raw::c_int;
use std::sync::OnceLock;

type ClockGettime = unsafe extern "C" fn(libc::clockid_t, *mut libc::timespec) -> c_int;

static CLOCK_GETTIME: OnceLock<ClockGettime> = OnceLock::new();

/// Resolves `clock_gettime` as the server itself resolves it (the process's
/// global scope), so that the module and the server agree on the time even
/// when the server loads modules with `RTLD_DEEPBIND` (Valkey) and the clock
/// is interposed (libfaketime and similar tools). Called once at load.
pub fn init() {
    CLOCK_GETTIME.get_or_init(|| {
        // SAFETY: dlopen(NULL) returns the main program's handle, whose
        // lookup scope is the process's global one (the program, then any
        // preloaded library, then libc); dlsym with a NUL-terminated name is
        // safe, and a non-null result for this name is the libc (or
        // interposed) function with the standard signature. The handle is
        // never closed: the main program outlives the module.
        let sym = unsafe {
            let main = libc::dlopen(std::ptr::null(), libc::RTLD_NOW);
            if main.is_null() {
                std::ptr::null_mut()
            } else {
                libc::dlsym(main, c"clock_gettime".as_ptr())
            }
        };
        if sym.is_null() {
            libc::clock_gettime
        } else {
            // SAFETY: see above; function and data pointers have the same
            // size on every platform Redis runs on.
            unsafe { std::mem::transmute::<*mut libc::c_void, ClockGettime>(sym) }
        }
    });
}

/// Nanoseconds since the Unix epoch from `CLOCK_REALTIME`.
pub fn now_nanos() -> i64 {
    let clock_gettime = CLOCK_GETTIME
        .get()
        .copied()
        .unwrap_or(libc::clock_gettime as ClockGettime);
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the
    // call, and CLOCK_REALTIME is always available on Linux.
    unsafe { clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec
        .saturating_mul(cell_core::NANOS_PER_SEC)
        .saturating_add(ts.tv_nsec)
}
