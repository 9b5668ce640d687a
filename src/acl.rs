//! The operators' commands (`CL.POLICY`, `CL.TOP`) belong to `@admin` and
//! `@dangerous`, so that a broad grant such as `+@all -@admin` leaves them
//! out. Where the server lets a module set a command's ACL categories
//! (Redis 7.2+, Valkey) they are set at registration. Redis 6.2 and 7.0
//! give module commands no category at all: there the commands check the
//! caller's rules themselves, reading them as the server would if the
//! commands were in those two categories.

use crate::error::CmdError;
use redis_module::{raw, Context, RedisString, RedisValue};

/// Whether the server sets module commands' categories itself.
pub fn server_has_categories() -> bool {
    api!(RedisModule_SetCommandACLCategories).is_some()
}

/// Refuses the call if the caller's ACL rules leave `@admin` or
/// `@dangerous` commands out, where the server cannot tell (6.2, 7.0).
/// `command` is the command's full name as ACL names it (`cl.policy|set`).
pub fn check_admin(ctx: &Context, command: &str) -> Result<(), CmdError> {
    if server_has_categories() || from_server(ctx) {
        return Ok(());
    }
    let Some(user) = current_user(ctx) else {
        return Ok(());
    };
    let rules = match ctx.call("ACL", &["GETUSER", user.as_str()]) {
        Ok(RedisValue::Array(fields)) => fields
            .chunks(2)
            .find_map(|pair| match pair {
                [name, value] if text(name).as_deref() == Some("commands") => text(value),
                _ => None,
            })
            .unwrap_or_default(),
        _ => return Ok(()),
    };
    if cell_core::acl::allows(&rules, command) {
        Ok(())
    } else {
        Err(CmdError::NoPermission(command_shown(command)))
    }
}

/// The replication stream and the AOF run as no user.
fn from_server(ctx: &Context) -> bool {
    let Some(get_flags) = api!(RedisModule_GetContextFlags) else {
        return true;
    };
    // SAFETY: the live context of the running command.
    let flags = unsafe { get_flags(ctx.ctx) } as u32;
    flags & (raw::REDISMODULE_CTX_FLAGS_REPLICATED | raw::REDISMODULE_CTX_FLAGS_LOADING) != 0
}

/// The name of the user the calling client is authenticated as.
fn current_user(ctx: &Context) -> Option<String> {
    let (get_id, get_name) = (
        api!(RedisModule_GetClientId)?,
        api!(RedisModule_GetClientUserNameById)?,
    );
    // SAFETY: the live context of the running command; the string the
    // server answers (or NULL) is owned by us and freed by `RedisString`.
    let name = unsafe {
        let id = get_id(ctx.ctx);
        let ptr = get_name(ctx.ctx, id);
        if ptr.is_null() {
            return None;
        }
        RedisString::from_redis_module_string(ctx.ctx, ptr)
    };
    name.try_as_str().ok().map(str::to_owned)
}

fn text(v: &RedisValue) -> Option<String> {
    match v {
        RedisValue::SimpleString(s) | RedisValue::BulkString(s) => Some(s.clone()),
        RedisValue::StringBuffer(b) => Some(String::from_utf8_lossy(b).into_owned()),
        RedisValue::BulkRedisString(s) => s.try_as_str().ok().map(str::to_owned),
        _ => None,
    }
}

fn command_shown(command: &str) -> cell_core::options::Shown {
    cell_core::options::shown(command.as_bytes())
}
