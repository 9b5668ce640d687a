//! Registration with the server: commands, their documentation, key specs
//! and ACL categories where the server supports them, the INFO section, and
//! the load log line. Optional server features are detected here, once.

use crate::commands::{self, Arg, ArgKind, Command, Docs, KeyUse, Keys, Role};
use crate::version::MODULE_VERSION_TEXT;
use redis_module::{raw, Context, RedisValue, Status};
use std::ffi::CString;
use std::os::raw::{c_char, c_int};
use std::sync::atomic::{AtomicBool, Ordering};

/// The ACL category every public command joins where supported.
const ACL_CATEGORY: &str = "ratelimit";
/// The ACL category of the effects the module writes for replicas and the
/// AOF, so that granting `@ratelimit` never grants writing raw state.
const EFFECT_CATEGORY: &str = "ratelimit-internal";
/// The category of the operators' commands (policies, top offenders).
const ADMIN_CATEGORY: &str = "ratelimit-admin";

/// Whether `GCRA` was registered at load (the module argument `gcra-command
/// yes`, and no `GCRA` in the server already).
static GCRA_REGISTERED: AtomicBool = AtomicBool::new(false);

/// Registers everything, and the opt-in `GCRA` when `gcra` is set; fails
/// the load only if a command cannot be created.
pub fn register_all(ctx: &Context, gcra: bool) -> Status {
    let gcra = gcra && !server_has_command(ctx, "gcra");
    let categories = add_acl_category(ctx, ACL_CATEGORY)
        && add_acl_category(ctx, EFFECT_CATEGORY)
        && add_acl_category(ctx, ADMIN_CATEGORY);
    let mut docs = true;
    // Whether the server accepts the `internal` command flag (Redis 8+):
    // unknown until the first effect is registered.
    let mut internal: Option<bool> = None;
    // Whether the server has subcommands (Redis 7.0+, Valkey).
    let subcommands = api!(RedisModule_CreateSubcommand).is_some();
    for command in commands::ALL
        .iter()
        .copied()
        .chain(gcra.then_some(&commands::GCRA_COMMAND))
    {
        let created = if command.role == Role::Effect && internal != Some(false) {
            match create(ctx, command, " internal") {
                Ok(()) => {
                    internal = Some(true);
                    true
                }
                // A server that does not know the flag refuses the command
                // before registering anything (Redis 6.2 to 7.4, Valkey):
                // the effects are created without it. Once one effect is
                // internal, all must be.
                Err(()) if internal.is_none() => {
                    internal = Some(false);
                    create(ctx, command, "").is_ok()
                }
                Err(()) => false,
            }
        } else if !command.subcommands.is_empty() && subcommands {
            create_container(ctx, command).is_ok()
        } else {
            create(ctx, command, "").is_ok()
        };
        if !created {
            ctx.log_warning(&format!("could not register {}", command.name));
            return Status::Err;
        }
        let category = match command.role {
            Role::Public => ACL_CATEGORY,
            Role::Admin => ADMIN_CATEGORY,
            Role::Effect => EFFECT_CATEGORY,
        };
        // The operators' commands are also `@admin` and `@dangerous`, so
        // that `+@all -@admin` leaves them out (where the server cannot set
        // categories, they check that themselves: see `acl`).
        let category = match (categories, command.role) {
            (true, Role::Admin) => Some(format!("{category} admin dangerous")),
            (true, _) => Some(category.to_string()),
            (false, Role::Admin) => Some("admin dangerous".to_string()),
            (false, _) => None,
        };
        docs &= set_docs(ctx, command.name, command.docs, command).is_ok();
        let mut names = vec![command.name.to_string()];
        if subcommands {
            for sub in command.subcommands {
                let full = format!("{}|{}", command.name, sub.name);
                docs &= set_docs(ctx, &full, sub.docs, command).is_ok();
                names.push(full);
            }
        }
        if let Some(category) = &category {
            for name in &names {
                set_acl_category(ctx, name, category);
            }
        }
    }
    if gcra {
        GCRA_REGISTERED.store(true, Ordering::Relaxed);
        ctx.log_notice(
            "redis-cell: GCRA registered (gcra-command yes); its keys are CL.THROTTLE's",
        );
    }
    if let Some(register_info) = api!(RedisModule_RegisterInfoFunc) {
        // SAFETY: `info` has the signature Redis expects and lives forever.
        unsafe { register_info(ctx.ctx, Some(info)) };
    }
    ctx.log_notice(&format!(
        "redis-cell {MODULE_VERSION_TEXT} loaded on server {}; command docs and key specs: {}; ACL categories @{ACL_CATEGORY}, @{ADMIN_CATEGORY} and @{EFFECT_CATEGORY}: {}; internal commands: {}; subcommands: {}; absolute expiry: {}",
        server_version(),
        yes_no(docs),
        yes_no(categories),
        yes_no(internal == Some(true)),
        yes_no(subcommands),
        yes_no(api!(RedisModule_SetAbsExpire).is_some()),
    ));
    Status::Ok
}

/// Whether the server (or a module loaded before this one) already has a
/// command of that name: `GCRA` is left to it, with a log line.
fn server_has_command(ctx: &Context, name: &str) -> bool {
    let known = match ctx.call("COMMAND", &["INFO", name]) {
        Ok(RedisValue::Array(infos)) => infos.iter().any(|i| !matches!(i, RedisValue::Null)),
        _ => false,
    };
    if known {
        ctx.log_notice(&format!(
            "redis-cell: gcra-command yes, but the server already has a {} command: the module's is not registered",
            name.to_uppercase()
        ));
    }
    known
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

/// Creates the command with its flags and `extra_flags` (empty, or a space
/// and more flags).
fn create(ctx: &Context, command: &Command, extra_flags: &str) -> Result<(), ()> {
    let name = CString::new(command.name).map_err(|_| ())?;
    let flags = CString::new(format!("{}{extra_flags}", command.flags)).map_err(|_| ())?;
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

/// Creates `command` as a container (no handler of its own) and its
/// subcommands, each with its own flags and the container's handler.
fn create_container(ctx: &Context, command: &Command) -> Result<(), ()> {
    let name = CString::new(command.name).map_err(|_| ())?;
    let (create, create_sub) = (
        api!(RedisModule_CreateCommand).ok_or(())?,
        api!(RedisModule_CreateSubcommand).ok_or(())?,
    );
    let no_flags = CString::new("").map_err(|_| ())?;
    // SAFETY: as in `create`; a NULL handler makes a container.
    let status = unsafe { create(ctx.ctx, name.as_ptr(), None, no_flags.as_ptr(), 0, 0, 0) };
    if status != raw::Status::Ok as c_int {
        return Err(());
    }
    let parent = command_handle(ctx, command.name).ok_or(())?;
    for sub in command.subcommands {
        let sub_name = CString::new(sub.name).map_err(|_| ())?;
        let flags = CString::new(sub.flags).map_err(|_| ())?;
        // SAFETY: a container created above during OnLoad, NUL-terminated
        // strings Redis copies, and an entry point with the expected
        // signature.
        let status = unsafe {
            create_sub(
                parent,
                sub_name.as_ptr(),
                Some(command.entry),
                flags.as_ptr(),
                0,
                0,
                0,
            )
        };
        if status != raw::Status::Ok as c_int {
            return Err(());
        }
    }
    Ok(())
}

fn command_handle(ctx: &Context, name: &str) -> Option<*mut raw::RedisModuleCommand> {
    let get = api!(RedisModule_GetCommand)?;
    let name = CString::new(name).ok()?;
    // SAFETY: a registered command's name, NUL-terminated.
    let handle = unsafe { get(ctx.ctx, name.as_ptr()) };
    (!handle.is_null()).then_some(handle)
}

/// Adds `COMMAND DOCS` information (summary, complexity, since, arity,
/// arguments) and the key spec: where the keys are and what the command
/// does with them, which ACL checks against key permissions.
fn set_docs(ctx: &Context, name: &str, docs: &Docs, command: &Command) -> Result<(), ()> {
    let set_info = api!(RedisModule_SetCommandInfo).ok_or(())?;
    let handle = command_handle(ctx, name).ok_or(())?;
    let mut arena = ArgArena::default();
    let summary = arena.text(docs.summary)?;
    let complexity = arena.text(docs.complexity)?;
    let since = arena.text(MODULE_VERSION_TEXT)?;
    let args = arena.args(docs.args)?;
    // A key-less command (server configuration) has no key spec.
    let mut key_specs = match command.keys {
        Keys::None => Vec::new(),
        // SAFETY: an all-zero key spec is plain data and the array terminator.
        _ => vec![key_spec(command), unsafe { std::mem::zeroed() }],
    };
    let version = raw::RedisModuleCommandInfoVersion {
        version: 1,
        sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
        sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
        sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
    };
    let info = raw::RedisModuleCommandInfo {
        version: &version,
        summary,
        complexity,
        since,
        history: std::ptr::null_mut(),
        tips: std::ptr::null(),
        arity: docs.arity,
        key_specs: if key_specs.is_empty() {
            std::ptr::null_mut()
        } else {
            key_specs.as_mut_ptr()
        },
        args,
    };
    // SAFETY: every pointer in `info` points into `arena`, `key_specs` or
    // `version`, all alive until this call returns; Redis copies what it
    // keeps.
    let status = unsafe { set_info(handle, &info) };
    if status == raw::Status::Ok as c_int {
        Ok(())
    } else {
        Err(())
    }
}

/// The command's one key spec: a key at argument 1, or `numkeys key [key
/// ...]` (the number at argument 1, the keys after it), with the flags of
/// what the command does with them.
fn key_spec(command: &Command) -> raw::RedisModuleCommandKeySpec {
    // SAFETY: an all-zero key spec is plain data, filled in below.
    let mut spec: raw::RedisModuleCommandKeySpec = unsafe { std::mem::zeroed() };
    spec.flags = u64::from(key_flags(command.key_use));
    spec.begin_search_type = raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
    spec.bs.index.pos = 1;
    match command.keys {
        Keys::First => {
            spec.find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
            spec.fk.range.lastkey = 0;
            spec.fk.range.keystep = 1;
            spec.fk.range.limit = 0;
        }
        Keys::Counted => {
            spec.find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_KEYNUM;
            spec.fk.keynum.keynumidx = 0;
            spec.fk.keynum.firstkey = 1;
            spec.fk.keynum.keystep = 1;
        }
        // Never asked: a key-less command gets no key spec.
        Keys::None => {}
    }
    spec
}

/// Key spec flags: one of RO/RW/OW, then whether the value is read into
/// the reply (ACCESS, read permission) and how it changes (UPDATE or
/// DELETE, write permission).
fn key_flags(key_use: KeyUse) -> u32 {
    match key_use {
        KeyUse::Read => raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS,
        KeyUse::ReadUpdate => {
            raw::REDISMODULE_CMD_KEY_RW
                | raw::REDISMODULE_CMD_KEY_ACCESS
                | raw::REDISMODULE_CMD_KEY_UPDATE
        }
        KeyUse::ReadDelete => {
            raw::REDISMODULE_CMD_KEY_RW
                | raw::REDISMODULE_CMD_KEY_ACCESS
                | raw::REDISMODULE_CMD_KEY_DELETE
        }
        KeyUse::Update => raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_UPDATE,
        KeyUse::Delete => raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_DELETE,
        KeyUse::Overwrite => raw::REDISMODULE_CMD_KEY_OW | raw::REDISMODULE_CMD_KEY_UPDATE,
    }
}

/// Owns the C strings and argument arrays of one command's info until
/// Redis has copied them. Moving a `CString` or a `Vec` does not move the
/// heap memory the pointers handed out point to.
#[derive(Default)]
struct ArgArena {
    strings: Vec<CString>,
    arrays: Vec<Vec<raw::RedisModuleCommandArg>>,
}

impl ArgArena {
    fn text(&mut self, s: &str) -> Result<*const c_char, ()> {
        let text = CString::new(s).map_err(|_| ())?;
        let ptr = text.as_ptr();
        self.strings.push(text);
        Ok(ptr)
    }

    /// The arguments as a terminated array, their sub-arguments included.
    fn args(&mut self, args: &[Arg]) -> Result<*mut raw::RedisModuleCommandArg, ()> {
        let mut array = Vec::with_capacity(args.len() + 1);
        self.push_args(&mut array, args)?;
        // SAFETY: the all-zero argument is the documented terminator.
        array.push(unsafe { std::mem::zeroed() });
        let ptr = array.as_mut_ptr();
        self.arrays.push(array);
        Ok(ptr)
    }

    /// Appends the arguments to `array`, an inline run's in its place.
    fn push_args(
        &mut self,
        array: &mut Vec<raw::RedisModuleCommandArg>,
        args: &[Arg],
    ) -> Result<(), ()> {
        for arg in args {
            // SAFETY: an all-zero argument is plain data (null pointers,
            // zero type and flags), filled in below.
            let mut slot: raw::RedisModuleCommandArg = unsafe { std::mem::zeroed() };
            slot.key_spec_index = -1;
            slot.type_ = match arg.kind {
                ArgKind::Inline(run) => {
                    self.push_args(array, run)?;
                    continue;
                }
                ArgKind::Key => {
                    slot.key_spec_index = 0;
                    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY
                }
                ArgKind::Integer => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
                ArgKind::Double => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_DOUBLE,
                ArgKind::Duration | ArgKind::String => {
                    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING
                }
                ArgKind::Token => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
                ArgKind::OneOf(sub) => {
                    slot.subargs = self.args(sub)?;
                    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF
                }
                ArgKind::Block(sub) => {
                    slot.subargs = self.args(sub)?;
                    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_BLOCK
                }
            };
            slot.name = self.text(arg.name)?;
            if let Some(token) = arg.token {
                slot.token = self.text(token)?;
            }
            if arg.optional {
                slot.flags |= raw::REDISMODULE_CMD_ARG_OPTIONAL as c_int;
            }
            if arg.multiple {
                slot.flags |= raw::REDISMODULE_CMD_ARG_MULTIPLE as c_int;
            }
            array.push(slot);
        }
        Ok(())
    }
}

fn add_acl_category(ctx: &Context, category: &str) -> bool {
    let (Some(add), Some(_)) = (
        api!(RedisModule_AddACLCategory),
        api!(RedisModule_SetCommandACLCategories),
    ) else {
        return false;
    };
    let Ok(name) = CString::new(category) else {
        return false;
    };
    // SAFETY: called during OnLoad with a NUL-terminated name.
    unsafe { add(ctx.ctx, name.as_ptr()) == raw::Status::Ok as c_int }
}

fn set_acl_category(ctx: &Context, name: &str, category: &str) {
    let (Some(set), Some(handle)) = (
        api!(RedisModule_SetCommandACLCategories),
        command_handle(ctx, name),
    ) else {
        return;
    };
    if let Ok(categories) = CString::new(category) {
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
    let gcra = GCRA_REGISTERED
        .load(Ordering::Relaxed)
        .then_some(&commands::GCRA_COMMAND);
    for command in commands::ALL.iter().copied().chain(gcra) {
        for (what, value) in command.stats.read() {
            let field = format!("{}_{what}", command.name.replace('.', "_"));
            if let Ok(field) = CString::new(field) {
                // SAFETY: a live info context and a NUL-terminated name.
                unsafe { add_field(ctx, field.as_ptr() as *mut c_char, value) };
            }
        }
    }
    crate::policies::info(ctx);
}
