//! Registration with the server: commands, their documentation and ACL
//! category where the server supports them, the INFO section, and the load
//! log line. Optional server features are detected here, once.

use crate::commands::{self, Arg, ArgKind, Command, Docs, Keys};
use crate::MODULE_VERSION_TEXT;
use redis_module::{raw, Context, Status};
use std::ffi::CString;
use std::os::raw::{c_char, c_int};

/// The ACL category every module command joins where supported.
const ACL_CATEGORY: &str = "ratelimit";

/// Registers everything; fails the load only if a command cannot be created.
pub fn register_all(ctx: &Context) -> Status {
    let category = add_acl_category(ctx);
    let mut docs = true;
    for command in commands::ALL {
        if create(ctx, command).is_err() {
            ctx.log_warning(&format!("could not register {}", command.name));
            return Status::Err;
        }
        docs &= set_docs(ctx, command).is_ok();
        if category {
            set_acl_category(ctx, command);
        }
    }
    if let Some(register_info) = api!(RedisModule_RegisterInfoFunc) {
        // SAFETY: `info` has the signature Redis expects and lives forever.
        unsafe { register_info(ctx.ctx, Some(info)) };
    }
    ctx.log_notice(&format!(
        "redis-cell {MODULE_VERSION_TEXT} loaded on server {}; command docs: {}; ACL category @{ACL_CATEGORY}: {}; absolute expiry: {}",
        server_version(),
        yes_no(docs),
        yes_no(category),
        yes_no(api!(RedisModule_SetAbsExpire).is_some()),
    ));
    Status::Ok
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

fn server_version() -> String {
    match api!(RedisModule_GetServerVersion) {
        // SAFETY: takes no arguments.
        Some(get) => {
            let v = unsafe { get() };
            format!("{}.{}.{}", (v >> 16) & 0xff, (v >> 8) & 0xff, v & 0xff)
        }
        None => "unknown (before 6.0.9)".to_string(),
    }
}

fn create(ctx: &Context, command: &Command) -> Result<(), ()> {
    let name = CString::new(command.name).map_err(|_| ())?;
    let flags = CString::new(command.flags).map_err(|_| ())?;
    let create = api!(RedisModule_CreateCommand).ok_or(())?;
    // Counted keys come from the key spec, or the getkeys API.
    let (first, last, step) = match command.keys {
        Keys::First => (1, 1, 1),
        Keys::Counted | Keys::None => (0, 0, 0),
    };
    // SAFETY: the context is the one Redis passed to OnLoad, the strings are
    // NUL-terminated and copied by Redis, and the entry point is an
    // `extern "C"` function with the signature Redis expects.
    let status = unsafe {
        create(
            ctx.ctx,
            name.as_ptr(),
            Some(command.entry),
            flags.as_ptr(),
            first,
            last,
            step,
        )
    };
    if status == raw::Status::Ok as c_int {
        Ok(())
    } else {
        Err(())
    }
}

fn command_handle(ctx: &Context, name: &str) -> Option<*mut raw::RedisModuleCommand> {
    let get = api!(RedisModule_GetCommand)?;
    let name = CString::new(name).ok()?;
    // SAFETY: a registered command's name, NUL-terminated.
    let handle = unsafe { get(ctx.ctx, name.as_ptr()) };
    (!handle.is_null()).then_some(handle)
}

/// Adds `COMMAND DOCS` information (summary, complexity, since, arity,
/// arguments) and, for counted keys, the key spec (`numkeys` at argument
/// 1, keys from argument 2). A single key's spec is left as Redis derives
/// it from the key positions 1,1,1.
fn set_docs(ctx: &Context, command: &Command) -> Result<(), ()> {
    let set_info = api!(RedisModule_SetCommandInfo).ok_or(())?;
    let handle = command_handle(ctx, command.name).ok_or(())?;
    let docs: &Docs = command.docs;
    let c = |s: &str| CString::new(s).map_err(|_| ());
    let summary = c(docs.summary)?;
    let complexity = c(docs.complexity)?;
    let since = c(MODULE_VERSION_TEXT)?;
    let names: Vec<CString> = docs
        .args
        .iter()
        .map(|a| c(a.name))
        .collect::<Result<_, _>>()?;
    let tokens: Vec<Option<CString>> = docs
        .args
        .iter()
        .map(|a| a.token.map(c).transpose())
        .collect::<Result<_, _>>()?;
    // SAFETY: an all-zero RedisModuleCommandArg is the documented array
    // terminator (null pointers, zero type and flags).
    let mut args: Vec<raw::RedisModuleCommandArg> =
        vec![unsafe { std::mem::zeroed() }; docs.args.len() + 1];
    for (((slot, arg), name), token) in args.iter_mut().zip(docs.args).zip(&names).zip(&tokens) {
        fill_arg(slot, arg, name, token.as_ref());
    }
    let mut key_specs = match command.keys {
        Keys::First | Keys::None => Vec::new(),
        // SAFETY: all-zero key specs are plain data; the second one is the
        // array terminator.
        Keys::Counted => vec![counted_key_spec(), unsafe { std::mem::zeroed() }],
    };
    let version = raw::RedisModuleCommandInfoVersion {
        version: 1,
        sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
        sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
        sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
    };
    let info = raw::RedisModuleCommandInfo {
        version: &version,
        summary: summary.as_ptr(),
        complexity: complexity.as_ptr(),
        since: since.as_ptr(),
        history: std::ptr::null_mut(),
        tips: std::ptr::null(),
        arity: docs.arity,
        key_specs: if key_specs.is_empty() {
            std::ptr::null_mut()
        } else {
            key_specs.as_mut_ptr()
        },
        args: args.as_mut_ptr(),
    };
    // SAFETY: every pointer in `info` is valid until this call returns and
    // Redis copies what it keeps.
    let status = unsafe { set_info(handle, &info) };
    if status == raw::Status::Ok as c_int {
        Ok(())
    } else {
        Err(())
    }
}

/// `numkeys key [key ...]`: the number of keys at argument 1, the keys
/// from argument 2 on, each read and updated.
fn counted_key_spec() -> raw::RedisModuleCommandKeySpec {
    // SAFETY: an all-zero key spec is plain data, filled in below.
    let mut spec: raw::RedisModuleCommandKeySpec = unsafe { std::mem::zeroed() };
    spec.flags = u64::from(
        raw::REDISMODULE_CMD_KEY_RW
            | raw::REDISMODULE_CMD_KEY_ACCESS
            | raw::REDISMODULE_CMD_KEY_UPDATE,
    );
    spec.begin_search_type = raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
    spec.bs.index.pos = 1;
    spec.find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_KEYNUM;
    spec.fk.keynum.keynumidx = 0;
    spec.fk.keynum.firstkey = 1;
    spec.fk.keynum.keystep = 1;
    spec
}

fn fill_arg(
    slot: &mut raw::RedisModuleCommandArg,
    arg: &Arg,
    name: &CString,
    token: Option<&CString>,
) {
    slot.name = name.as_ptr();
    slot.type_ = match arg.kind {
        ArgKind::Key => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
        ArgKind::Integer => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
        ArgKind::Double => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_DOUBLE,
        ArgKind::Token => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
        ArgKind::String => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
    };
    slot.key_spec_index = if matches!(arg.kind, ArgKind::Key) {
        0
    } else {
        -1
    };
    if matches!(arg.kind, ArgKind::Token) {
        slot.token = name.as_ptr();
    }
    if let Some(token) = token {
        slot.token = token.as_ptr();
    }
    if arg.optional {
        slot.flags |= raw::REDISMODULE_CMD_ARG_OPTIONAL as c_int;
    }
    if arg.multiple {
        slot.flags |= raw::REDISMODULE_CMD_ARG_MULTIPLE as c_int;
    }
}

fn add_acl_category(ctx: &Context) -> bool {
    let (Some(add), Some(_)) = (
        api!(RedisModule_AddACLCategory),
        api!(RedisModule_SetCommandACLCategories),
    ) else {
        return false;
    };
    let Ok(name) = CString::new(ACL_CATEGORY) else {
        return false;
    };
    // SAFETY: called during OnLoad with a NUL-terminated name.
    unsafe { add(ctx.ctx, name.as_ptr()) == raw::Status::Ok as c_int }
}

fn set_acl_category(ctx: &Context, command: &Command) {
    let (Some(set), Some(handle)) = (
        api!(RedisModule_SetCommandACLCategories),
        command_handle(ctx, command.name),
    ) else {
        return;
    };
    if let Ok(categories) = CString::new(ACL_CATEGORY) {
        // SAFETY: a registered command and a NUL-terminated list.
        unsafe { set(handle, categories.as_ptr()) };
    }
}

/// The `redis-cell` INFO section: per command, calls, allowed, limited and
/// errors.
extern "C" fn info(ctx: *mut raw::RedisModuleInfoCtx, _for_crash_report: c_int) {
    let (Some(add_section), Some(add_field)) = (
        api!(RedisModule_InfoAddSection),
        api!(RedisModule_InfoAddFieldULongLong),
    ) else {
        return;
    };
    // SAFETY: a NULL section name selects the module's default section.
    unsafe { add_section(ctx, std::ptr::null_mut()) };
    for command in commands::ALL {
        for (what, value) in command.stats.read() {
            let field = format!("{}_{what}", command.name.replace('.', "_"));
            if let Ok(field) = CString::new(field) {
                // SAFETY: a live info context and a NUL-terminated name.
                unsafe { add_field(ctx, field.as_ptr() as *mut c_char, value) };
            }
        }
    }
    crate::policy::info(ctx);
}
