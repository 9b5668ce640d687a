//! `CL.POLICY SET name limiter [SHADOW]`, `CL.POLICY GET name`,
//! `CL.POLICY DEL name`, `CL.POLICY LIST`: the server's named policies.
//! `limiter` is written as in `CL.THROTTLEALL` and read by the same code.
//!
//! `SET` and `DEL` change the server's configuration, not a key: they are
//! replicated verbatim (replicas and the AOF run them as given) and
//! refused on a read-only replica unless they come from its master or the
//! AOF. `GET` and `LIST` work everywhere.

use crate::args::Args;
use crate::error::{self, CmdError};
use crate::handler::{Reply, Value};
use crate::limiter;
use crate::policy;
use cell_core::options::Opt;
use cell_core::policy::valid_name;
use redis_module::{raw, Context};

pub fn policy(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.require(2)?;
    let sub = args.word(1);
    let is = |name: &[u8]| sub.eq_ignore_ascii_case(name);
    if is(b"SET") {
        set(ctx, args)
    } else if is(b"GET") {
        args.expect_len(3, 3)?;
        get(args.word(2))
    } else if is(b"DEL") {
        args.expect_len(3, 3)?;
        del(ctx, args.word(2))
    } else if is(b"PROMOTE") {
        args.expect_len(3, 3)?;
        promote(ctx, args.word(2))
    } else if is(b"LIST") {
        args.expect_len(2, 2)?;
        let names = policy::registry()
            .names()
            .into_iter()
            .map(|n| Value::Bytes(n.to_vec()))
            .collect();
        Ok(Reply::Value(Value::Array(names)))
    } else {
        Err(error::UNKNOWN_SUBCOMMAND)
    }
}

const SHADOW: &[Opt] = &[Opt::Flag("SHADOW")];

fn set(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.require(4)?;
    let name = args.word(2);
    if !valid_name(name) {
        return Err(error::BAD_POLICY_NAME);
    }
    let kind = limiter::kind_of(args.word(3)).ok_or(error::UNKNOWN_LIMITER)?;
    let words = |i: usize| args.bytes(i);
    let is_trial = |w: &[u8]| w.eq_ignore_ascii_case(b"TRIAL");
    let read = limiter::read(
        &words,
        kind,
        4,
        SHADOW,
        &is_trial,
        error::POLICY_LIMITER_WORDS,
    )?;
    let shadow = read.options.has(read.own);
    // `TRIAL limiter`: the rest of the words, a limiter of the same kind.
    let trial = match args.bytes(read.next) {
        None => None,
        Some(_) => {
            let at = read.next + 1;
            let word = args.bytes(at).ok_or(error::POLICY_LIMITER_WORDS)?;
            let kind = limiter::kind_of(word).ok_or(error::UNKNOWN_LIMITER)?;
            let t = limiter::read(
                &words,
                kind,
                at + 1,
                &[],
                &|_| false,
                error::POLICY_LIMITER_WORDS,
            )?;
            if t.next != args.len() {
                return Err(error::POLICY_LIMITER_WORDS);
            }
            if limiter::family(&t.limiter) != limiter::family(&read.limiter) {
                return Err(error::TRIAL_KIND);
            }
            Some(t.limiter)
        }
    };
    // The limiter's words as given, without SHADOW (which is the policy's,
    // not the limiter's), for GET, the RDB file and the AOF.
    let mut kept: Vec<Vec<u8>> = Vec::with_capacity(args.len() - 3);
    for i in 3..args.len() {
        let w = args.word(i);
        let is_tz_value = i > 3 && args.word(i - 1).eq_ignore_ascii_case(b"TZ");
        if !is_tz_value && w.eq_ignore_ascii_case(b"SHADOW") {
            continue;
        }
        kept.push(w.to_vec());
    }
    if kept.len() > cell_core::policy::MAX_WORDS
        || kept.iter().any(|w| w.len() > cell_core::policy::MAX_WORD)
    {
        return Err(error::POLICY_LIMITER_WORDS);
    }
    refuse_on_replica(ctx)?;
    let mut registry = policy::registry();
    if let Some(old) = registry.policy(name) {
        if limiter::family(&old.limiter) != limiter::family(&read.limiter) {
            return Err(error::POLICY_KIND_CHANGE);
        }
    }
    registry.set(name, read.limiter, shadow, kept)?;
    registry.set_trial(name, trial);
    drop(registry);
    ctx.replicate_verbatim();
    Ok(Reply::Ok)
}

/// `PROMOTE name`: the trial becomes the policy's limiter, applied live
/// as `SET` applies a new one (the policy keeps its shadow flag, counters
/// and summary; the trial, its counters and its keys' use end). Replicated
/// as the `SET` it amounts to.
fn promote(ctx: &Context, name: &[u8]) -> Result<Reply, CmdError> {
    refuse_on_replica(ctx)?;
    let mut registry = policy::registry();
    let p = registry
        .policy(name)
        .ok_or_else(|| error::unknown_policy(name))?;
    let (Some(trial), (_, Some(words))) = (p.trial.as_ref(), policy::split_trial(&p.words)) else {
        return Err(error::no_trial(name));
    };
    let (limiter, words, shadow) = (trial.limiter.clone(), words.to_vec(), p.shadow);
    let mut replicated: Vec<&[u8]> = vec![b"SET", name];
    replicated.extend(words.iter().map(Vec::as_slice));
    if shadow {
        replicated.push(b"SHADOW");
    }
    registry.set(name, limiter, shadow, words.clone())?;
    registry.set_trial(name, None);
    drop(registry);
    raw::replicate(ctx.ctx, "CL.POLICY", replicated.as_slice());
    Ok(Reply::Ok)
}

fn get(name: &[u8]) -> Result<Reply, CmdError> {
    let registry = policy::registry();
    let p = registry
        .policy(name)
        .ok_or_else(|| error::unknown_policy(name))?;
    let (own, trial_words) = policy::split_trial(&p.words);
    let text = own.join(&b' ');
    let c = p.counters;
    let field = |n: &str| Value::Bytes(n.as_bytes().to_vec());
    let int = |n: u64| Value::Int(i64::try_from(n).unwrap_or(i64::MAX));
    let mut fields = vec![
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
        fields.extend([
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
    Ok(Reply::Value(Value::Array(fields)))
}

fn del(ctx: &Context, name: &[u8]) -> Result<Reply, CmdError> {
    refuse_on_replica(ctx)?;
    let deleted = policy::registry().delete(name);
    if deleted {
        ctx.replicate_verbatim();
    }
    Ok(Reply::Integer(i64::from(deleted)))
}

/// A read-only replica takes policy changes only from its master (and
/// from its AOF while loading).
fn refuse_on_replica(ctx: &Context) -> Result<(), CmdError> {
    let Some(get_flags) = api!(RedisModule_GetContextFlags) else {
        return Ok(());
    };
    // SAFETY: the live context of the running command.
    let flags = unsafe { get_flags(ctx.ctx) } as u32;
    let from_master =
        flags & (raw::REDISMODULE_CTX_FLAGS_REPLICATED | raw::REDISMODULE_CTX_FLAGS_LOADING) != 0;
    if flags & raw::REDISMODULE_CTX_FLAGS_READONLY != 0 && !from_master {
        return Err(error::READONLY_REPLICA);
    }
    Ok(())
}
