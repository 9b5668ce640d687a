//! `SW.ALLOW key limit window [quantity] [APPROX] [MS] [SHADOW] [POLICY name]` and
//! `SW.PEEK key limit window [APPROX] [MS] [POLICY name]`: the exact sliding window log
//! (or, with APPROX, the two-window counter), stored in the module's own
//! data type; and the two commands that replay its effects:
//! `SW.RECORD` and `SW.UNRECORD key window_ns at_ns [quantity] [APPROX]`
//! (replication, AOF) and `SW.LOAD key payload` (AOF rewrite).

use super::docs::vocabulary::{arg, flag, optional, ArgKind, Docs};
use super::{limit_command, open_key, peek_command, Arg};
use crate::args::Args;
use crate::error::{self, CmdError};
use crate::handler::Reply;
use crate::limiter::{self, Kind};
use crate::store::{Access, Key};
use crate::types::WINDOW_TYPE;
use cell_core::window_state::WindowState;
use redis_module::Context;

/// `SW.RECORD key window_ns at_ns [quantity] [APPROX]`: records a request
/// at an explicit time (quantity 1 when not given). It is what replicas and
/// the AOF receive for every allowed `SW.ALLOW`, so they hold the master's
/// state exactly.
pub fn record(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    replay(ctx, args, error::BAD_RECORD, limiter::record)
}

/// `SW.UNRECORD key window_ns at_ns [quantity] [APPROX]`: gives back
/// `quantity` at an explicit time. It is what replicas and the AOF receive
/// for every `SW.REFUND`, so they hold the master's state exactly.
pub fn unrecord(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    replay(ctx, args, error::BAD_UNRECORD, limiter::unrecord)
}

/// Applies a window effect to the key with `apply` (its arguments checked
/// as [`effect`] checks them) and replicates it as it came.
fn replay<T>(
    ctx: &Context,
    args: &Args,
    invalid: CmdError,
    apply: fn(&mut Key, i64, i64, i64, bool) -> Result<T, CmdError>,
) -> Result<Reply, CmdError> {
    let (window, at, quantity, approx) = effect(args, invalid)?;
    let mut key = open_key(ctx, args, Access::Write)?;
    apply(&mut key, window, at, quantity, approx)?;
    ctx.replicate_verbatim();
    Ok(Reply::Ok)
}

/// The arguments of a window effect, `window_ns at_ns [quantity] [APPROX]`,
/// checked (`invalid` when out of range).
fn effect(args: &Args, invalid: CmdError) -> Result<(i64, i64, i64, bool), CmdError> {
    args.expect_len(4, 6)?;
    let window = args.integer(2)?;
    let at = args.integer(3)?;
    let is_approx = |i| {
        args.bytes(i)
            .is_some_and(|b| b.eq_ignore_ascii_case(b"APPROX"))
    };
    let (quantity, approx) = match args.len() {
        4 => (1, false),
        5 if is_approx(4) => (1, true),
        5 => (args.integer(4)?, false),
        _ if is_approx(5) => (args.integer(4)?, true),
        _ => return Err(error::SYNTAX),
    };
    if window < 1 || at < 0 || quantity < 1 {
        return Err(invalid);
    }
    Ok((window, at, quantity, approx))
}

/// `SW.LOAD key payload`: replaces the key's sliding window with a
/// serialized one (what an AOF rewrite emits), expiring when its newest
/// request leaves the window; an empty window deletes the key. The payload
/// must carry its window (payloads of redis-cell 0.1.0 do not).
pub fn load(ctx: &Context, args: &Args) -> Result<Reply, CmdError> {
    args.expect_len(3, 3)?;
    let payload = args.word(2);
    let state = WindowState::decode(payload).ok_or(error::BAD_PAYLOAD)?;
    if matches!(state, WindowState::Exact { window: None, .. }) {
        return Err(error::PAYLOAD_WITHOUT_WINDOW);
    }
    let mut key = open_key(ctx, args, Access::Write)?;
    let expire_at_ms = state.expire_at_ms();
    if key.load(&WINDOW_TYPE, state, expire_at_ms, c"sw.load")? {
        ctx.replicate_verbatim();
    }
    Ok(Reply::Ok)
}

command! {
    SW_ALLOW: "sw.allow" => |ctx, args| limit_command(ctx, args, Kind::Sliding),
    flags: super::WRITE,
    keys: First, key_use: ReadUpdate, role: Public,
    docs: Docs {
        summary: "Exact sliding window limit (or, with APPROX, the sliding window counter): admits `quantity` or refuses, and answers [limited, limit, remaining, retry_after, reset_after].",
        complexity: "O(1) amortised; O(C) at worst, C the entries of one 12 KiB chunk of the log",
        arity: -4,
        args: &[
            arg("key", Key),
            SW_LIMITER,
            optional("quantity", Integer),
            flag("APPROX"),
            flag("MS"),
            flag("SHADOW"),
            keyword("POLICY", "name", String),
        ],
    },
}

command! {
    SW_PEEK: "sw.peek" => |ctx, args| peek_command(ctx, args, Kind::Sliding),
    flags: super::READ,
    keys: First, key_use: Read, role: Public,
    docs: Docs {
        summary: "Answers what SW.ALLOW would with quantity 0, without writing.",
        complexity: "O(1) amortised; O(C) at worst, C the entries of one 12 KiB chunk of the log",
        arity: -4,
        args: &[
            arg("key", Key),
            SW_LIMITER,
            flag("APPROX"),
            flag("MS"),
            keyword("POLICY", "name", String),
        ],
    },
}

// The effects replicas and the AOF replay for the commands above.
command! {
    SW_RECORD: "sw.record" => record,
    flags: "write deny-oom",
    keys: First, key_use: Update, role: Effect,
    docs: window_effect("Records a request in a sliding window at an explicit time (the effect SW.ALLOW replicates)."),
}

command! {
    SW_UNRECORD: "sw.unrecord" => unrecord,
    flags: "write",
    keys: First, key_use: Delete, role: Effect,
    docs: window_effect("Gives back `quantity` in a sliding window at an explicit time (the effect SW.REFUND replicates)."),
}

/// The docs of a window effect: `key window_ns at_ns [quantity] [APPROX]`.
const fn window_effect(summary: &'static str) -> Docs {
    const ARGS: &[Arg] = &[
        arg("key", ArgKind::Key),
        arg("window_ns", ArgKind::Integer),
        arg("at_ns", ArgKind::Integer),
        optional("quantity", ArgKind::Integer),
        flag("APPROX"),
    ];
    Docs {
        summary,
        complexity: "O(1) amortised",
        arity: -4,
        args: ARGS,
    }
}

command! {
    SW_LOAD: "sw.load" => load,
    flags: "write deny-oom",
    keys: First, key_use: Overwrite, role: Effect,
    docs: Docs {
        summary: "Replaces a sliding window with a serialized one (what an AOF rewrite emits), expiring when its newest request leaves the window.",
        complexity: "O(N) in the entries",
        arity: 3,
        args: &[arg("key", Key), arg("payload", String)],
    },
}
