//! The policy set outside memory: RDB auxiliary data (the `cell-pols`
//! type), the server's load, flush and fork events that keep it exact, and
//! its replication (`CL.POLICY SET ... ZONEINFO rules`).

use super::registry::{registry, Policy, Trial};
use super::words::{made_from, split_trial};
use crate::types::NO_METHODS;
use cell_core::policy::{self, Counters, Saved};
use cell_core::top::Seeded;
use redis_module::native_types::RedisType;
use redis_module::{raw, Context, Status};
use std::collections::HashMap;
use std::os::raw::{c_int, c_void};

const AUX_VERSION: i32 = 0;

/// Holds no keys: it carries the policy set in RDB files (and in the RDB
/// preamble of an AOF rewrite, and the RDB of a full sync).
///
/// Both save callbacks are given, and the server picks by the methods'
/// version it knows: Redis 7.2+ and Valkey read version 5 and call
/// `aux_save2`, which writes nothing when there are no policies, so that
/// such a file loads without the module; Redis 6.2 and 7.0 read the fields
/// of their older versions only (a newer version is accepted) and call
/// `aux_save`, which always writes the set.
pub static POLICY_TYPE: RedisType = RedisType::new(
    "cell-pols",
    AUX_VERSION,
    raw::RedisModuleTypeMethods {
        rdb_load: Some(no_key_load),
        rdb_save: Some(no_key_save),
        free: Some(no_key_free),
        aux_load: Some(aux_load),
        aux_save: Some(aux_save),
        aux_save2: Some(aux_save2),
        aux_save_triggers: raw::REDISMODULE_AUX_BEFORE_RDB as c_int,
        ..NO_METHODS
    },
);

/// No key ever holds a `cell-pols` value; a payload that claims one is
/// refused.
unsafe extern "C" fn no_key_load(_rdb: *mut raw::RedisModuleIO, _encver: c_int) -> *mut c_void {
    std::ptr::null_mut()
}

unsafe extern "C" fn no_key_save(_rdb: *mut raw::RedisModuleIO, _value: *mut c_void) {}

unsafe extern "C" fn no_key_free(_value: *mut c_void) {}

/// Redis 6.2 and 7.0: saves the whole set, even when empty (such a file
/// needs the module to load).
unsafe extern "C" fn aux_save(rdb: *mut raw::RedisModuleIO, when: c_int) {
    if when != raw::REDISMODULE_AUX_BEFORE_RDB as c_int {
        return;
    }
    let data = policy::encode(&registry().saved());
    raw::save_slice(rdb, &data);
}

/// Redis 7.2+ and Valkey: saves the set unless it is empty; writing
/// nothing leaves no trace of the module in the file.
unsafe extern "C" fn aux_save2(rdb: *mut raw::RedisModuleIO, when: c_int) {
    if when != raw::REDISMODULE_AUX_BEFORE_RDB as c_int {
        return;
    }
    let saved = registry().saved();
    if saved.is_empty() {
        return;
    }
    raw::save_slice(rdb, &policy::encode(&saved));
}

/// Reads the set saved. While an RDB loads (see [`on_loading`]) it waits
/// for the load to succeed; otherwise (an AOF's RDB preamble, whose
/// commands that follow change the set as they replay) it replaces the set
/// at once. A payload that does not decode, or a policy whose limiter this
/// module does not read, fails the load (the module handles I/O errors:
/// the server refuses the file instead of aborting).
unsafe extern "C" fn aux_load(rdb: *mut raw::RedisModuleIO, encver: c_int, when: c_int) -> c_int {
    const ERR: c_int = raw::REDISMODULE_ERR as c_int;
    if encver != AUX_VERSION || when != raw::REDISMODULE_AUX_BEFORE_RDB as c_int {
        return ERR;
    }
    let Ok(buffer) = raw::load_string_buffer(rdb) else {
        return ERR;
    };
    let Some(saved) = policy::decode(buffer.as_ref()) else {
        return ERR;
    };
    let mut policies = HashMap::with_capacity_and_hasher(saved.len(), Seeded::new());
    for s in saved {
        let made = made_from(&s.name, s.words, s.zone);
        policies.insert(
            s.name,
            Policy {
                limiter: made.limiter,
                shadow: s.shadow,
                words: made.words,
                zone: made.zone,
                unusable: made.unusable,
                counters: Counters::default(),
                top: None,
                trial: made.trial.map(Trial::new),
            },
        );
    }
    let mut r = registry();
    match r.loading.as_mut() {
        Some(loading) => *loading = policies,
        None => r.policies = policies,
    }
    raw::REDISMODULE_OK as c_int
}

/// Follows the server's loads, so that each ends with exactly the set its
/// data carries, also when an RDB saved by Redis 7.2+ or Valkey has none:
///
/// - An RDB (a restart, `DEBUG RELOAD`, a replica's full sync, on disk or
///   diskless): the loaded set replaces the current one when the load ends,
///   and only if it succeeds. Until then the current set stays, as the
///   current keys do while a replica loads with `repl-diskless-load
///   swapdb` (the old dataset is served until the new one is complete, and
///   kept if the load fails).
/// - An AOF: the set is cleared when the load starts; the RDB preamble (if
///   any) and the replayed `CL.POLICY` commands then make it.
unsafe extern "C" fn on_loading(
    _ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    subevent: u64,
    _data: *mut c_void,
) {
    let mut r = registry();
    match subevent {
        raw::REDISMODULE_SUBEVENT_LOADING_RDB_START
        | raw::REDISMODULE_SUBEVENT_LOADING_REPL_START => {
            r.loading = Some(HashMap::with_hasher(Seeded::new()));
        }
        raw::REDISMODULE_SUBEVENT_LOADING_AOF_START => {
            r.loading = None;
            r.policies.clear();
        }
        raw::REDISMODULE_SUBEVENT_LOADING_ENDED => {
            if let Some(loaded) = r.loading.take() {
                r.policies = loaded;
            }
        }
        raw::REDISMODULE_SUBEVENT_LOADING_FAILED => r.loading = None,
        _ => {}
    }
}

/// `FLUSHALL` empties the summaries: the keys they name are gone (a
/// `FLUSHDB` of one database keeps them; they do not say which database a
/// key was in).
unsafe extern "C" fn on_flush(
    _ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    subevent: u64,
    data: *mut c_void,
) {
    if subevent != raw::REDISMODULE_SUBEVENT_FLUSHDB_END || data.is_null() {
        return;
    }
    // SAFETY: the server passes its flush information with this event.
    let info = unsafe { &*(data as *const raw::RedisModuleFlushInfo) };
    if info.dbnum == -1 {
        registry().clear_summaries();
    }
}

/// An AOF rewrite writes its base in a child process; with
/// `aof-use-rdb-preamble no` that base holds commands for keys only, so the
/// policy set would be lost at the next load. When the child of an AOF
/// rewrite is born, the parent therefore sets a timer that propagates
/// `CL.POLICY SET` for every policy at once (in the next turn of the event
/// loop, outside the command that may have forked, whose propagation it
/// would otherwise change). The commands land in what follows the new base
/// (Redis 7.0+ and Valkey open the new incremental file before the fork;
/// Redis 6.2 appends the rewrite buffer to the base): the set then
/// replays to exactly the one of that instant, whatever the base holds and
/// whatever changed between the fork and the timer. With the RDB preamble
/// they repeat its aux data, and replicas get what they hold already.
unsafe extern "C" fn on_fork(
    ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    subevent: u64,
    _data: *mut c_void,
) {
    if subevent != raw::REDISMODULE_SUBEVENT_FORK_CHILD_BORN || !aof_rewrite_in_progress(ctx) {
        return;
    }
    if let Some(create_timer) = api!(RedisModule_CreateTimer) {
        // SAFETY: the event's live context; the callback takes no data.
        unsafe { create_timer(ctx, 0, Some(write_policies), std::ptr::null_mut()) };
    }
}

/// How long [`write_policies`] waits before it tries again while the
/// server forbids propagation, in milliseconds.
const PAUSED_RETRY_MS: i64 = 50;

/// The timer set by [`on_fork`]: `CL.POLICY SET` for every policy, to the
/// AOF and the replicas. Nothing may propagate while the server pauses
/// writes (`CLIENT PAUSE ... WRITE`, a failover): the server would abort.
/// Then the timer waits and tries again; the commands still land after the
/// new base, which is all they need.
unsafe extern "C" fn write_policies(ctx: *mut raw::RedisModuleCtx, _data: *mut c_void) {
    if let Some(avoid) = api!(RedisModule_AvoidReplicaTraffic) {
        // SAFETY: takes no arguments; answers whether the server pauses
        // the replication stream.
        if unsafe { avoid() } != 0 {
            if let Some(create_timer) = api!(RedisModule_CreateTimer) {
                // SAFETY: the timer's live context; the callback takes no
                // data.
                unsafe {
                    create_timer(
                        ctx,
                        PAUSED_RETRY_MS,
                        Some(write_policies),
                        std::ptr::null_mut(),
                    )
                };
            }
            return;
        }
    }
    let saved = registry().saved();
    for s in saved {
        replicate_set(ctx, &s);
    }
}

/// Propagates `CL.POLICY SET` for the policy `s`, its zone's rules
/// included (`ZONEINFO`, taken only from a master or an AOF).
pub fn replicate_set(ctx: *mut raw::RedisModuleCtx, s: &Saved) {
    let mut words: Vec<&[u8]> = vec![b"SET", &s.name];
    // SHADOW is the enforced limiter's option: before any TRIAL.
    let (own, trial) = split_trial(&s.words);
    words.extend(own.iter().map(Vec::as_slice));
    if s.shadow {
        words.push(b"SHADOW");
    }
    if let Some(trial) = trial {
        words.push(b"TRIAL");
        words.extend(trial.iter().map(Vec::as_slice));
    }
    if let Some(zone) = &s.zone {
        words.push(ZONEINFO);
        words.push(zone);
    }
    raw::replicate(ctx, "CL.POLICY", words.as_slice());
}

/// The word before a zone's rules in a replicated `CL.POLICY SET`.
pub const ZONEINFO: &[u8] = b"ZONEINFO";

/// Whether the child just born writes an AOF rewrite.
fn aof_rewrite_in_progress(ctx: *mut raw::RedisModuleCtx) -> bool {
    let (Some(get), Some(field), Some(free)) = (
        api!(RedisModule_GetServerInfo),
        api!(RedisModule_ServerInfoGetFieldSigned),
        api!(RedisModule_FreeServerInfo),
    ) else {
        return false;
    };
    // SAFETY: the event's live context; the info data is freed once.
    unsafe {
        let info = get(ctx, c"persistence".as_ptr());
        if info.is_null() {
            return false;
        }
        let mut err: c_int = 0;
        let v = field(info, c"aof_rewrite_in_progress".as_ptr(), &mut err);
        free(ctx, info);
        err == 0 && v == 1
    }
}

/// Subscribes [`on_loading`] to the server's loading events and
/// [`on_fork`] to its fork events (Redis 6.0+, every Valkey). A server
/// without them has no `aux_save2` either: every file it saves carries the
/// set, which its load then replaces.
pub fn subscribe_to_events(ctx: &Context) -> Status {
    let Some(subscribe) = api!(RedisModule_SubscribeToServerEvent) else {
        return Status::Ok;
    };
    let events: [(u64, raw::RedisModuleEventCallback, &str); 3] = [
        (raw::REDISMODULE_EVENT_LOADING, Some(on_loading), "loading"),
        (raw::REDISMODULE_EVENT_FORK_CHILD, Some(on_fork), "fork"),
        (raw::REDISMODULE_EVENT_FLUSHDB, Some(on_flush), "flush"),
    ];
    for (id, callback, what) in events {
        let event = raw::RedisModuleEvent { id, dataver: 1 };
        // SAFETY: called during OnLoad with the load context; the callbacks
        // have the signature the server expects.
        if unsafe { subscribe(ctx.ctx, event, callback) } != raw::REDISMODULE_OK as c_int {
            ctx.log_warning(&format!(
                "redis-cell: could not subscribe to the server's {what} events"
            ));
            return Status::Err;
        }
    }
    Status::Ok
}
