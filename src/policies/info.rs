//! The `redis-cell_policies` INFO section.

use super::registry::REGISTRY;
use redis_module::raw;
use std::ffi::CString;

/// The `redis-cell_policies` INFO section: the summaries' capacity, the
/// number of policies, and per policy its counters and shadow flag
/// (`policy_<name>:calls=..,allowed=..,refused=..,shadow_refused=..,errors=..,shadow=0|1`,
/// then `trial_calls=..,trial_allowed=..,trial_refused=..,trial_errors=..`
/// for a policy with a trial).
pub fn info(ctx: *mut raw::RedisModuleInfoCtx) {
    let (Some(add_section), Some(add_field), Some(begin), Some(end)) = (
        api!(RedisModule_InfoAddSection),
        api!(RedisModule_InfoAddFieldULongLong),
        api!(RedisModule_InfoBeginDictField),
        api!(RedisModule_InfoEndDictField),
    ) else {
        return;
    };
    // INFO also runs in a crash report, perhaps with the lock held by the
    // command that crashed: never wait for it.
    let registry = match REGISTRY.try_lock() {
        Ok(r) => r,
        Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => return,
    };
    // SAFETY: a live info context and NUL-terminated names, here and
    // below.
    unsafe {
        add_section(ctx, c"policies".as_ptr().cast_mut());
        add_field(
            ctx,
            c"top_capacity".as_ptr().cast_mut(),
            registry.capacity as u64,
        );
        add_field(
            ctx,
            c"policies".as_ptr().cast_mut(),
            registry.policies.len() as u64,
        );
        let (used, worst) = registry.top_memory();
        add_field(ctx, c"top_memory_bytes".as_ptr().cast_mut(), used as u64);
        add_field(
            ctx,
            c"top_memory_max_bytes".as_ptr().cast_mut(),
            worst as u64,
        );
    }
    for (name, shadow, c) in registry.counters() {
        // Names are printable ASCII without NUL (checked on SET and load).
        let Ok(field) = CString::new([b"policy_", name].concat()) else {
            continue;
        };
        let values = [
            (c"calls", c.calls),
            (c"allowed", c.allowed),
            (c"refused", c.refused),
            (c"shadow_refused", c.shadow_refused),
            (c"errors", c.errors),
            (c"shadow", u64::from(shadow)),
        ];
        unsafe {
            begin(ctx, field.as_ptr().cast_mut());
            for (what, value) in values {
                add_field(ctx, what.as_ptr().cast_mut(), value);
            }
            if let Some(t) = registry.policies.get(name).and_then(|p| p.trial.as_ref()) {
                let c = t.counters;
                let trial = [
                    (c"trial_calls", c.calls),
                    (c"trial_allowed", c.allowed),
                    (c"trial_refused", c.shadow_refused),
                    (c"trial_errors", c.errors),
                ];
                for (what, value) in trial {
                    add_field(ctx, what.as_ptr().cast_mut(), value);
                }
            }
            end(ctx);
        }
    }
}
