//! `CL.POLICY SET name limiter [SHADOW]`, `CL.POLICY GET name`,
//! `CL.POLICY DEL name`, `CL.POLICY LIST`: the server's named policies.
//! `limiter` is written as in `CL.THROTTLEALL` and read by the same code.
//!
//! `SET` and `DEL` change the server's configuration, not a key: they are
//! writes as far as the server can tell (see `POLICY_SUBCOMMANDS`: paused
//! by `CLIENT PAUSE WRITE` and failovers, refused on read-only replicas,
//! under OOM, NOREPLICAS and in read-only scripts), and are replicated
//! verbatim (replicas and the AOF run them as given). Where the server has
//! no subcommands (Redis 6.2) they make those checks here. `GET`, `LIST`
//! and `HELP` work everywhere.

use super::docs::vocabulary::{arg, flag, keyword, ArgKind, Docs};
use super::{Arg, Subcommand};
use crate::acl;
use crate::args::Args;
use crate::error::{self, CmdError};
use crate::handler::{Reply, Value};
use crate::limiter;
use crate::policies::{self, ZONEINFO};
use cell_core::options::{self, Opt};
use cell_core::policy::{valid_name, Saved};
use redis_module::{raw, Context};

pub fn policy(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.require(2)?;
    let sub = args.word(1);
    let is = |name: &[u8]| sub.eq_ignore_ascii_case(name);
    let known = ["SET", "GET", "DEL", "PROMOTE", "LIST", "HELP"]
        .into_iter()
        .find(|n| is(n.as_bytes()));
    match known {
        Some(n) => acl::check_admin(ctx, &format!("cl.policy|{}", n.to_ascii_lowercase()))?,
        None => acl::check_admin(ctx, "cl.policy")?,
    }
    let arity = |name: &'static str, min: usize, max: usize| {
        if (min..=max).contains(&args.len()) {
            Ok(())
        } else {
            Err(CmdError::SubcommandArity(name))
        }
    };
    if is(b"SET") {
        arity("cl.policy|set", 4, usize::MAX)?;
        set(ctx, args)
    } else if is(b"GET") {
        arity("cl.policy|get", 3, 3)?;
        get(args.word(2))
    } else if is(b"DEL") {
        arity("cl.policy|del", 3, 3)?;
        del(ctx, args.word(2))
    } else if is(b"PROMOTE") {
        arity("cl.policy|promote", 3, 3)?;
        promote(ctx, args.word(2))
    } else if is(b"LIST") {
        arity("cl.policy|list", 2, 2)?;
        let names = policies::registry()
            .names()
            .into_iter()
            .map(|n| Value::Bytes(n.to_vec()))
            .collect();
        Ok(Reply::Value(Value::Array(names)))
    } else if is(b"HELP") {
        arity("cl.policy|help", 2, 2)?;
        Ok(Reply::Value(Value::Array(
            HELP.iter()
                .map(|line| Value::Bytes(line.as_bytes().to_vec()))
                .collect(),
        )))
    } else {
        Err(error::unknown_subcommand(sub))
    }
}

const HELP: &[&str] = &[
    "CL.POLICY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "SET <name> <limiter> [SHADOW] [TRIAL <limiter>]",
    "    Create or replace a policy; <limiter> as in CL.THROTTLEALL.",
    "GET <name>",
    "    The policy's limiter, shadow flag and counters.",
    "DEL <name>",
    "    Remove a policy.",
    "PROMOTE <name>",
    "    Make the policy's trial its limiter.",
    "LIST",
    "    The names of all policies.",
    "HELP",
    "    Print this help.",
];

const SHADOW: &[Opt] = &[options::SHADOW];

fn set(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    let name = args.word(2);
    if !valid_name(name) {
        return Err(error::BAD_POLICY_NAME);
    }
    // From a master or an AOF the zone's rules follow the limiter
    // (`ZONEINFO rules`, written by the node where the policy was set).
    let from_master = from_master(ctx);
    let (len, zone) = match args.len() {
        n if from_master && n >= 6 && args.word(n - 2).eq_ignore_ascii_case(ZONEINFO) => {
            (n - 2, Some(args.word(n - 1).to_vec()))
        }
        n => (n, None),
    };
    let words = |i: usize| if i < len { args.bytes(i) } else { None };
    // The limiter's words as given, without SHADOW (which is the policy's,
    // not the limiter's), for GET, the RDB file and the AOF.
    let mut kept: Vec<Vec<u8>> = Vec::with_capacity(len.saturating_sub(3));
    let mut shadow = false;
    for i in 3..len {
        let w = args.word(i);
        let is_tz_value = i > 3 && args.word(i - 1).eq_ignore_ascii_case(b"TZ");
        if !is_tz_value && w.eq_ignore_ascii_case(b"SHADOW") {
            shadow = true;
            continue;
        }
        kept.push(w.to_vec());
    }
    let made = if from_master {
        // Never refused: a policy this node cannot use is kept, marked and
        // logged, so that it is neither dropped nor breaks the stream.
        policies::made_from(name, kept, zone)
    } else {
        let kind = limiter::kind_of(args.word(3)).ok_or(error::UNKNOWN_LIMITER)?;
        let is_trial = |w: &[u8]| w.eq_ignore_ascii_case(b"TRIAL");
        let read = limiter::read(
            &words,
            kind,
            4,
            SHADOW,
            &is_trial,
            error::POLICY_LIMITER_WORDS,
        )?;
        // `TRIAL limiter`: the rest of the words, a limiter of the same kind.
        if words(read.next).is_some() {
            let at = read.next + 1;
            let word = words(at).ok_or(error::POLICY_LIMITER_WORDS)?;
            let kind = limiter::kind_of(word).ok_or(error::UNKNOWN_LIMITER)?;
            let t = limiter::read(
                &words,
                kind,
                at + 1,
                &[],
                &|_| false,
                error::POLICY_LIMITER_WORDS,
            )?;
            if t.next != len {
                return Err(error::POLICY_LIMITER_WORDS);
            }
            if limiter::family(&t.limiter) != limiter::family(&read.limiter) {
                return Err(error::TRIAL_KIND);
            }
        }
        if kept.len() > cell_core::policy::MAX_WORDS
            || kept.iter().any(|w| w.len() > cell_core::policy::MAX_WORD)
        {
            return Err(error::POLICY_LIMITER_WORDS);
        }
        refuse_unless_writable(ctx, true)?;
        policies::made_here(kept)?
    };
    let mut registry = policies::registry();
    if let (Some(old), Some(new)) = (
        registry.policy(name).and_then(|p| p.limiter.as_ref()),
        made.limiter.as_ref(),
    ) {
        if limiter::family(old) != limiter::family(new) && !from_master {
            return Err(error::POLICY_KIND_CHANGE);
        }
    }
    let saved = Saved {
        name: name.to_vec(),
        shadow,
        words: made.words.clone(),
        zone: made.zone.clone(),
    };
    let trial = made.trial.clone();
    registry.set(name, made, shadow)?;
    registry.set_trial(name, trial);
    drop(registry);
    if from_master || saved.zone.is_none() {
        ctx.replicate_verbatim();
    } else {
        policies::replicate_set(ctx.ctx, &saved);
    }
    Ok(Reply::Ok)
}

/// Whether the command comes from this node's master or its AOF.
fn from_master(ctx: &Context) -> bool {
    let Some(get_flags) = api!(RedisModule_GetContextFlags) else {
        return false;
    };
    // SAFETY: the live context of the running command.
    let flags = unsafe { get_flags(ctx.ctx) } as u32;
    flags & (raw::REDISMODULE_CTX_FLAGS_REPLICATED | raw::REDISMODULE_CTX_FLAGS_LOADING) != 0
}

/// `PROMOTE name`: the trial becomes the policy's limiter, applied live
/// as `SET` applies a new one (the policy keeps its shadow flag, counters
/// and summary; the trial, its counters and its keys' use end). Replicated
/// as the `SET` it amounts to, with the zone's rules if it names a zone.
fn promote(ctx: &Context, name: &[u8]) -> Result<Reply, CmdError> {
    if !from_master(ctx) {
        refuse_unless_writable(ctx, true)?;
    }
    let registry = policies::registry();
    let p = registry
        .policy(name)
        .ok_or_else(|| error::unknown_policy(name))?;
    let (Some(_), (_, Some(words))) = (p.trial.as_ref(), policies::split_trial(&p.words)) else {
        return Err(error::no_trial(name));
    };
    let (words, shadow) = (words.to_vec(), p.shadow);
    drop(registry);
    let made = policies::made_here(words)?;
    let saved = Saved {
        name: name.to_vec(),
        shadow,
        words: made.words.clone(),
        zone: made.zone.clone(),
    };
    let mut registry = policies::registry();
    registry.set(name, made, shadow)?;
    registry.set_trial(name, None);
    drop(registry);
    policies::replicate_set(ctx.ctx, &saved);
    Ok(Reply::Ok)
}

fn get(name: &[u8]) -> Result<Reply, CmdError> {
    let registry = policies::registry();
    let p = registry
        .policy(name)
        .ok_or_else(|| error::unknown_policy(name))?;
    let (own, trial_words) = policies::split_trial(&p.words);
    let text = own.join(&b' ');
    let c = p.counters;
    let field = |n: &str| Value::Bytes(n.as_bytes().to_vec());
    let int = |n: u64| Value::Int(i64::try_from(n).unwrap_or(i64::MAX));
    let mut reply = vec![
        field("limiter"),
        Value::Bytes(text),
        field("shadow"),
        Value::Int(i64::from(p.shadow)),
        field("calls"),
        int(c.calls),
        field("allowed"),
        int(c.allowed),
        field("refused"),
        int(c.refused),
        field("shadow_refused"),
        int(c.shadow_refused),
        field("errors"),
        int(c.errors),
    ];
    if let (Some(t), Some(words)) = (p.trial.as_ref(), trial_words) {
        let c = t.counters;
        reply.extend([
            field("trial"),
            Value::Bytes(words.join(&b' ')),
            field("trial_calls"),
            int(c.calls),
            field("trial_allowed"),
            int(c.allowed),
            field("trial_refused"),
            int(c.shadow_refused),
            field("trial_errors"),
            int(c.errors),
        ]);
    }
    // A policy this server keeps but cannot use says why.
    if let Err(e) = registry.lookup(name) {
        reply.push(field("unusable"));
        reply.push(Value::Bytes(
            e.text().unwrap_or_default().as_bytes().to_vec(),
        ));
    }
    Ok(Reply::Value(Value::Array(reply)))
}

fn del(ctx: &Context, name: &[u8]) -> Result<Reply, CmdError> {
    refuse_unless_writable(ctx, false)?;
    let deleted = policies::registry().delete(name);
    if deleted {
        ctx.replicate_verbatim();
    }
    Ok(Reply::Integer(i64::from(deleted)))
}

/// The checks the server makes before a write, made here where the
/// server cannot make them: on a server without subcommands `CL.POLICY`
/// is one command, which may not be flagged `write` (GET and LIST must run
/// on replicas). A read-only replica takes policy changes only from its
/// master (and from its AOF while loading); a master refuses them under
/// OOM (`SET` only, as `deny-oom` does) and without enough good replicas
/// (`min-replicas-to-write`). With subcommands the server has made them
/// already (and the replica check stays, for the same answer everywhere).
fn refuse_unless_writable(ctx: &Context, deny_oom: bool) -> Result<(), CmdError> {
    let Some(get_flags) = api!(RedisModule_GetContextFlags) else {
        return Ok(());
    };
    // SAFETY: the live context of the running command.
    let flags = unsafe { get_flags(ctx.ctx) } as u32;
    let from_master =
        flags & (raw::REDISMODULE_CTX_FLAGS_REPLICATED | raw::REDISMODULE_CTX_FLAGS_LOADING) != 0;
    if from_master {
        return Ok(());
    }
    if flags & raw::REDISMODULE_CTX_FLAGS_READONLY != 0 {
        return Err(error::READONLY_REPLICA);
    }
    if api!(RedisModule_CreateSubcommand).is_some() {
        return Ok(());
    }
    if deny_oom && flags & raw::REDISMODULE_CTX_FLAGS_OOM != 0 {
        return Err(error::OOM);
    }
    if flags & raw::REDISMODULE_CTX_FLAGS_MASTER != 0 && !enough_good_replicas(ctx) {
        return Err(error::NOREPLICAS);
    }
    Ok(())
}

/// Whether `min-replicas-to-write` is met: `INFO replication` reports the
/// good replicas (`min_slaves_good_slaves`) only when it is set.
fn enough_good_replicas(ctx: &Context) -> bool {
    let need = match ctx.call("CONFIG", &["GET", "min-replicas-to-write"]) {
        Ok(redis_module::RedisValue::Array(v)) => match v.get(1) {
            Some(redis_module::RedisValue::SimpleString(s)) => s.parse::<i64>().unwrap_or(0),
            Some(redis_module::RedisValue::BulkString(s)) => s.parse::<i64>().unwrap_or(0),
            _ => 0,
        },
        _ => 0,
    };
    if need <= 0 {
        return true;
    }
    let info = match ctx.call("INFO", &["replication"]) {
        Ok(redis_module::RedisValue::SimpleString(s))
        | Ok(redis_module::RedisValue::BulkString(s)) => s,
        _ => return true,
    };
    info.lines()
        .find_map(|l| l.strip_prefix("min_slaves_good_slaves:"))
        .and_then(|n| n.trim().parse::<i64>().ok())
        .is_none_or(|good| good >= need)
}

// A container of subcommands where the server has them (Redis 7.0+,
// Valkey; see POLICY_SUBCOMMANDS), so that SET and DEL are writes to
// the server (paused by CLIENT PAUSE WRITE and failovers, refused on
// replicas, under OOM, NOREPLICAS and in read-only scripts) while GET
// and LIST run anywhere. Where it has none (Redis 6.2), one command
// with these flags: `may-replicate` is what CLIENT PAUSE WRITE holds
// back there, and SET and DEL make a write's other checks themselves.
// `admin` puts both operators' commands in @admin (and @dangerous) on
// every server, which is all a server without module ACL categories
// can tell about them.
command! {
    CL_POLICY: "cl.policy" => policy,
    flags: "may-replicate admin",
    keys: None, key_use: Read, role: Admin,
    subcommands: POLICY_SUBCOMMANDS,
    docs: Docs {
        summary: "Named policies: SET name limiter [SHADOW] [TRIAL limiter] creates or replaces one (live, no reset), with a trial limiter run in shadow beside it; GET name answers its limiters, shadow flag and counters; PROMOTE name makes the trial the limit; DEL name removes it; LIST names them all. Server configuration, not keys: saved in RDB, replicated, per node in a cluster.",
        complexity: "O(1); LIST O(N log N) in the policies",
        arity: -2,
        args: &[
            arg(
                "subcommand",
                OneOf(&[
                    block("SET", SET_ARGS),
                    block("GET", NAME),
                    block("DEL", NAME),
                    block("PROMOTE", NAME),
                    word("LIST"),
                    word("HELP"),
                ]),
            ),
        ],
    },
}

/// `CL.POLICY`'s subcommands, where the server has subcommands.
const POLICY_SUBCOMMANDS: &[Subcommand] = &[
    Subcommand {
        name: "set",
        flags: "write deny-oom admin",
        docs: &CL_POLICY_SET,
    },
    Subcommand {
        name: "del",
        flags: "write admin",
        docs: &CL_POLICY_DEL,
    },
    Subcommand {
        name: "promote",
        flags: "write deny-oom admin",
        docs: &CL_POLICY_PROMOTE,
    },
    Subcommand {
        name: "get",
        flags: "readonly admin",
        docs: &CL_POLICY_GET,
    },
    Subcommand {
        name: "list",
        flags: "readonly admin",
        docs: &CL_POLICY_LIST,
    },
    Subcommand {
        name: "help",
        flags: "readonly admin allow-loading allow-stale",
        docs: &CL_POLICY_HELP,
    },
];

/// `SET name limiter [SHADOW] [TRIAL limiter]`.
const SET_ARGS: &[Arg] = &[
    arg("name", ArgKind::String),
    arg("limiter", ArgKind::String),
    flag("SHADOW"),
    keyword("TRIAL", "limiter", ArgKind::String),
];

/// The argument of `GET`, `DEL` and `PROMOTE`: a policy's name.
const NAME: &[Arg] = &[arg("name", ArgKind::String)];

const CL_POLICY_SET: Docs = Docs {
    summary:
        "Creates or replaces the named policy (live, no reset); a write: replicated and saved.",
    complexity: "O(1)",
    arity: 0,
    args: SET_ARGS,
};

const CL_POLICY_PROMOTE: Docs = by_name("Makes the named policy's trial its limiter (live, as SET), and ends the trial; a write: replicated and saved.");

const CL_POLICY_GET: Docs =
    by_name("Answers the named policy's limiter, shadow flag and counters.");

const CL_POLICY_DEL: Docs = by_name("Removes the named policy; answers 1, or 0 if there was none.");

/// The docs of a subcommand that takes a policy's name, in O(1).
const fn by_name(summary: &'static str) -> Docs {
    Docs {
        summary,
        complexity: "O(1)",
        arity: 0,
        args: NAME,
    }
}

const CL_POLICY_LIST: Docs = Docs {
    summary: "Names every policy, sorted.",
    complexity: "O(N log N) in the policies",
    arity: 0,
    args: &[],
};

const CL_POLICY_HELP: Docs = Docs {
    summary: "Lists the subcommands of CL.POLICY.",
    complexity: "O(1)",
    arity: 0,
    args: &[],
};
