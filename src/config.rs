//! The module's configuration, read in one place at load: the module
//! arguments (`loadmodule libredis_cell.so gcra-command yes top-capacity
//! 2048`, in pairs, in any order) and, where the server has module
//! configuration (Redis 7.0+, Valkey), `redis-cell.top-capacity` for
//! `CONFIG SET/GET` and the config file. A module argument wins over the
//! config file.

use crate::policies::{registry, DEFAULT_TOP_CAPACITY, MAX_TOP_CAPACITY};
use redis_module::{raw, Context, RedisString};
use std::os::raw::{c_char, c_int, c_void};

/// What the module arguments ask for.
pub struct Config {
    /// `gcra-command yes`: register the opt-in `GCRA` command.
    pub gcra: bool,
    /// `top-capacity N`: the top-offender summaries' capacity, in keys.
    pub top_capacity: Option<usize>,
}

/// Reads the module arguments; `None` after logging what is wrong.
pub fn read(ctx: &Context, args: &[RedisString]) -> Option<Config> {
    let mut config = Config {
        gcra: false,
        top_capacity: None,
    };
    for pair in args.chunks(2) {
        let name = pair[0].as_slice();
        let value = pair.get(1).map(|v| v.as_slice());
        if name.eq_ignore_ascii_case(b"gcra-command") {
            match value.map(<[u8]>::to_ascii_lowercase).as_deref() {
                Some(b"yes") => config.gcra = true,
                Some(b"no") => config.gcra = false,
                _ => {
                    ctx.log_warning("redis-cell: bad module arguments; expected `gcra-command yes` or `gcra-command no`");
                    return None;
                }
            }
            continue;
        }
        let n = value.and_then(|v| cell_core::parse::integer(v).ok());
        match (name.eq_ignore_ascii_case(b"top-capacity"), n) {
            (true, Some(n)) if (0..=MAX_TOP_CAPACITY as i64).contains(&n) => {
                config.top_capacity = Some(n as usize)
            }
            _ => {
                ctx.log_warning(&format!(
                    "redis-cell: bad module arguments; expected `top-capacity N` with N from 0 to {MAX_TOP_CAPACITY}"
                ));
                return None;
            }
        }
    }
    Some(config)
}

/// Registers `redis-cell.top-capacity` where the server has module
/// configuration, then applies the module argument over it. `false` after
/// logging a failure.
pub fn apply(ctx: &Context, config: &Config) -> bool {
    if let (Some(register), Some(load)) = (
        api!(RedisModule_RegisterNumericConfig),
        api!(RedisModule_LoadConfigs),
    ) {
        // SAFETY: called during OnLoad; the name is NUL-terminated and the
        // callbacks have the signatures the server expects.
        let ok = unsafe {
            register(
                ctx.ctx,
                c"top-capacity".as_ptr(),
                DEFAULT_TOP_CAPACITY as i64,
                raw::REDISMODULE_CONFIG_DEFAULT,
                0,
                MAX_TOP_CAPACITY as i64,
                Some(get_capacity),
                Some(set_capacity),
                None,
                std::ptr::null_mut(),
            ) == raw::REDISMODULE_OK as c_int
                && load(ctx.ctx) == raw::REDISMODULE_OK as c_int
        };
        if !ok {
            ctx.log_warning("redis-cell: could not register redis-cell.top-capacity");
            return false;
        }
    }
    if let Some(n) = config.top_capacity {
        registry().set_capacity(n);
    }
    true
}

unsafe extern "C" fn get_capacity(_name: *const c_char, _privdata: *mut c_void) -> i64 {
    registry().capacity() as i64
}

unsafe extern "C" fn set_capacity(
    _name: *const c_char,
    value: i64,
    _privdata: *mut c_void,
    _err: *mut *mut raw::RedisModuleString,
) -> c_int {
    // The server checked the bounds it was given.
    let value = usize::try_from(value).unwrap_or(DEFAULT_TOP_CAPACITY);
    let mut registry = registry();
    if registry.capacity() != value {
        registry.set_capacity(value);
    }
    raw::REDISMODULE_OK as c_int
}
