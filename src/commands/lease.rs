//! Concurrency leases: at most `limit` requests in flight on a key.
//!
//! - `CC.ACQUIRE key limit lease [ID id] [MS]` (options in any order): takes a lease that expires
//!   `lease` seconds from now, or renews the one `id` holds; answers
//!   `[limited, limit, remaining, retry_after, reset_after, id]` (`id` nil
//!   when refused).
//! - `CC.RELEASE key id`, `CC.RENEW key id lease`: `1` if `id` held a lease.
//! - `CC.PEEK key limit [MS]`: the five integers, nothing written.
//!
//! Replicas and the AOF receive `CC.HOLD key id expires_at_ns now_ns` and
//! `CC.DROP key id now_ns`, with the master's clock; AOF rewrites emit
//! `CC.LOAD key payload`.

use super::open_key;
use crate::args::Args;
use crate::clock;
use crate::error::{self, CmdError};
use crate::handler::Reply;
use crate::limiter;
use crate::store::{Access, Arg, Key};
use crate::types::LEASE_TYPE;
use cell_core::lease::{Acquire, Leases, MAX_ID};
use cell_core::options::{ID, MS};
use cell_core::reply::millis_rounded_up;
use redis_module::{raw, Context};

pub fn acquire(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.require(4)?;
    let options = args.options(4, &[ID, MS])?;
    let limit = limiter::limit(args.word(2))?;
    let lease = lease(args.word(3))?;
    let id = options.value(ID).map(lease_id).transpose()?;
    let unit = super::unit(&options);
    let mut key = open_key(ctx, args, Access::Write)?;
    let now = clock::now_nanos();
    let (decision, verdict) = match key.value::<Leases>(&LEASE_TYPE)? {
        Some(leases) => leases.acquire(limit, now, lease, id)?,
        None => Leases::new().acquire(limit, now, lease, id)?,
    };
    let Acquire::Hold { expires_at, .. } = decision else {
        return Ok(Reply::Lease(verdict, None, unit));
    };
    let id = id.map_or_else(random_id, <[u8]>::to_vec);
    hold(&mut key, &id, expires_at, now)?;
    key.replicate(
        c"CC.HOLD",
        &[Arg::Bytes(&id), Arg::Int(expires_at), Arg::Int(now)],
    );
    Ok(Reply::Lease(verdict, Some(id), unit))
}

pub fn release(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.require(3)?;
    args.options(3, &[])?;
    let id = lease_id(args.word(2))?;
    let mut key = open_key(ctx, args, Access::Write)?;
    let now = clock::now_nanos();
    if !holds(&mut key, id, now)? {
        return Ok(Reply::Integer(0));
    }
    drop_lease(&mut key, id, now)?;
    key.replicate(c"CC.DROP", &[Arg::Bytes(id), Arg::Int(now)]);
    Ok(Reply::Integer(1))
}

pub fn renew(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.require(4)?;
    args.options(4, &[])?;
    let id = lease_id(args.word(2))?;
    let lease = lease(args.word(3))?;
    let mut key = open_key(ctx, args, Access::Write)?;
    let now = clock::now_nanos();
    if !holds(&mut key, id, now)? {
        return Ok(Reply::Integer(0));
    }
    let expires_at = now.checked_add(lease).ok_or(error::OVERFLOW)?;
    hold(&mut key, id, expires_at, now)?;
    key.replicate(
        c"CC.HOLD",
        &[Arg::Bytes(id), Arg::Int(expires_at), Arg::Int(now)],
    );
    Ok(Reply::Integer(1))
}

pub fn peek(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.require(3)?;
    let options = args.options(3, &[MS])?;
    let limit = limiter::limit(args.word(2))?;
    let mut key = open_key(ctx, args, Access::Read)?;
    let now = clock::now_nanos();
    let verdict = match key.value::<Leases>(&LEASE_TYPE)? {
        Some(leases) => leases.verdict(limit, now),
        None => Leases::new().verdict(limit, now),
    };
    Ok(Reply::Verdict(verdict, super::unit(&options)))
}

/// `CC.HOLD key id expires_at_ns now_ns`: drops the leases expired at
/// `now_ns`, then holds `id` until `expires_at_ns`.
pub fn hold_effect(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.expect_len(5, 5)?;
    let id = lease_id(args.word(2))?;
    let (expires_at, now) = (args.integer(3)?, args.integer(4)?);
    if now < 0 || expires_at <= now {
        return Err(error::BAD_HOLD);
    }
    let mut key = open_key(ctx, args, Access::Write)?;
    hold(&mut key, id, expires_at, now)?;
    ctx.replicate_verbatim();
    Ok(Reply::Ok)
}

/// `CC.DROP key id now_ns`: drops the leases expired at `now_ns` and
/// `id`'s lease, when `id` holds one at `now_ns` (as it does whenever a
/// master replicated the release); otherwise nothing changes, nothing is
/// signalled and nothing propagates, as for a `CC.RELEASE` that answers 0.
pub fn drop_effect(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.expect_len(4, 4)?;
    let id = lease_id(args.word(2))?;
    let now = args.integer(3)?;
    if now < 0 {
        return Err(error::BAD_DROP);
    }
    let mut key = open_key(ctx, args, Access::Write)?;
    if holds(&mut key, id, now)? {
        drop_lease(&mut key, id, now)?;
        ctx.replicate_verbatim();
    }
    Ok(Reply::Ok)
}

/// `CC.LOAD key payload`: replaces the key's leases with serialized ones
/// (what an AOF rewrite emits), expiring with the last lease; no leases
/// deletes the key.
pub fn load(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.expect_len(3, 3)?;
    let leases = Leases::decode(args.word(2)).ok_or(error::BAD_LEASES)?;
    let mut key = open_key(ctx, args, Access::Write)?;
    let expire_at_ms = leases.last_expiry().map(millis_rounded_up);
    if key.load(&LEASE_TYPE, leases, expire_at_ms, c"cc.load")? {
        ctx.replicate_verbatim();
    }
    Ok(Reply::Ok)
}

/// A lease duration, `> 0`.
fn lease(word: &[u8]) -> Result<i64, CmdError> {
    match error::duration(word, error::BAD_LEASE)? {
        l if l < 1 => Err(error::LEASE_NOT_POSITIVE),
        l => Ok(l),
    }
}

fn lease_id(id: &[u8]) -> Result<&[u8], CmdError> {
    if id.len() > MAX_ID {
        return Err(error::ID_TOO_LONG);
    }
    Ok(id)
}

/// 128 random bits in hex, from the server's generator: unique per key
/// with overwhelming probability, across restarts and failovers (replicas
/// receive the id itself).
fn random_id() -> Vec<u8> {
    let mut id = vec![b'0'; 32];
    if let Some(hex) = api!(RedisModule_GetRandomHexChars) {
        // SAFETY: `id` has room for the 32 characters asked for.
        unsafe { hex(id.as_mut_ptr().cast(), id.len()) };
    }
    id
}

fn holds(key: &mut Key, id: &[u8], now: i64) -> Result<bool, CmdError> {
    Ok(key
        .value::<Leases>(&LEASE_TYPE)?
        .is_some_and(|l| l.holds(id, now)))
}

/// The one write path of a lease being taken or renewed, shared by the
/// commands and the `CC.HOLD` effect.
fn hold(key: &mut Key, id: &[u8], expires_at: i64, now: i64) -> Result<(), CmdError> {
    let leases = match key.value::<Leases>(&LEASE_TYPE)? {
        Some(leases) => leases,
        None => key.set_value(&LEASE_TYPE, Leases::new())?,
    };
    let renewed = leases.hold(id, expires_at, now);
    let last = leases.last_expiry();
    key.changed();
    let event = if renewed { c"cc.renew" } else { c"cc.acquire" };
    key.notify(raw::NotifyEvent::MODULE, event);
    expire(key, last)
}

/// The one write path of a release (the `CC.DROP` effect too), for an `id`
/// that holds a lease at `now`: the key goes with its last lease.
fn drop_lease(key: &mut Key, id: &[u8], now: i64) -> Result<(), CmdError> {
    let Some(leases) = key.value::<Leases>(&LEASE_TYPE)? else {
        return Ok(());
    };
    leases.release(id, now);
    let last = leases.last_expiry();
    if leases.is_empty() {
        return key.delete(false);
    }
    key.changed();
    key.notify(raw::NotifyEvent::MODULE, c"cc.release");
    expire(key, last)
}

/// The key expires with its last lease (`last`, rounded up to the
/// millisecond, so never before it).
fn expire(key: &mut Key, last: Option<i64>) -> Result<(), CmdError> {
    match last {
        Some(ns) => key.set_abs_expire(millis_rounded_up(ns)),
        None => Ok(()),
    }
}

command! {
    CC_ACQUIRE: "cc.acquire" => acquire,
    flags: super::LEASE_WRITE,
    keys: First, key_use: ReadUpdate, role: Public,
    docs: Docs {
        summary: "Takes one of `limit` concurrent leases, expiring `lease` from now unless renewed (or renews the one `id` holds); answers [limited, limit, remaining, retry_after, reset_after, id], id nil when refused.",
        complexity: "O(N) in the leases held",
        arity: -4,
        args: &[
            arg("key", Key),
            arg("limit", Integer),
            arg("lease", Duration),
            keyword("ID", "id", String),
            flag("MS"),
        ],
    },
}

command! {
    CC_RELEASE: "cc.release" => release,
    flags: super::LEASE_REFUND,
    keys: First, key_use: Delete, role: Public,
    docs: Docs {
        summary:
            "Releases the lease `id` holds: 1 if it held one, 0 if not (expired, released, unknown).",
        complexity: "O(N) in the leases held",
        arity: -3,
        args: &[arg("key", Key), arg("id", String)],
    },
}

command! {
    CC_RENEW: "cc.renew" => renew,
    flags: super::LEASE_REFUND,
    keys: First, key_use: Update, role: Public,
    docs: Docs {
        summary: "Extends the lease `id` holds to `lease` from now: 1 if it held one, 0 if not (the slot is lost).",
        complexity: "O(N) in the leases held",
        arity: -4,
        args: &[arg("key", Key), arg("id", String), arg("lease", Duration)],
    },
}

command! {
    CC_PEEK: "cc.peek" => peek,
    flags: super::LEASE_READ,
    keys: First, key_use: Read, role: Public,
    docs: Docs {
        summary: "Answers [limited, limit, remaining, retry_after, reset_after] for the leases held now, without writing.",
        complexity: "O(N) in the leases held",
        arity: -3,
        args: &[arg("key", Key), arg("limit", Integer), flag("MS")],
    },
}

command! {
    CC_HOLD: "cc.hold" => hold_effect,
    flags: "write deny-oom",
    keys: First, key_use: Update, role: Effect,
    docs: Docs {
        summary: "Holds a lease until an explicit time after dropping those expired at `now_ns` (the effect CC.ACQUIRE and CC.RENEW replicate).",
        complexity: "O(N) in the leases held",
        arity: 5,
        args: &[
            arg("key", Key),
            arg("id", String),
            arg("expires_at_ns", Integer),
            arg("now_ns", Integer),
        ],
    },
}

command! {
    CC_DROP: "cc.drop" => drop_effect,
    flags: "write",
    keys: First, key_use: Delete, role: Effect,
    docs: Docs {
        summary: "Releases a lease after dropping those expired at `now_ns` (the effect CC.RELEASE replicates).",
        complexity: "O(N) in the leases held",
        arity: 4,
        args: &[arg("key", Key), arg("id", String), arg("now_ns", Integer)],
    },
}

command! {
    CC_LOAD: "cc.load" => load,
    flags: "write deny-oom",
    keys: First, key_use: Overwrite, role: Effect,
    docs: Docs {
        summary: "Replaces a key's leases with serialized ones (what an AOF rewrite emits), expiring with the last lease.",
        complexity: "O(N) in the leases",
        arity: 3,
        args: &[arg("key", Key), arg("payload", String)],
    },
}
