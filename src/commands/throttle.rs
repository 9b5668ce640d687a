//! `CL.THROTTLE key max_burst count_per_period period [quantity] [MS] [SHADOW] [POLICY name]` and
//! `CL.PEEK key max_burst count_per_period period [MS] [POLICY name]` (options in any
//! order): GCRA,
//! state-compatible with the original redis-cell (a string holding the TAT
//! in nanoseconds).

use super::{limit_command, peek_command};
use crate::limiter::Kind;

command! {
    CL_THROTTLE: "cl.throttle" => |ctx, args| limit_command(ctx, args, Kind::Gcra),
    flags: super::WRITE,
    keys: First, key_use: ReadUpdate, role: Public,
    docs: Docs {
        summary: "Rate-limits a key with GCRA (redis-cell compatible): admits `quantity` or refuses, and answers [limited, limit, remaining, retry_after, reset_after] (durations in seconds, or ms with MS).",
        complexity: "O(1)",
        arity: -5,
        args: &[
            arg("key", Key),
            GCRA_LIMITER,
            optional("quantity", Integer),
            flag("MS"),
            flag("SHADOW"),
            keyword("POLICY", "name", String),
        ],
    },
}

command! {
    CL_PEEK: "cl.peek" => |ctx, args| peek_command(ctx, args, Kind::Gcra),
    flags: super::READ,
    keys: First, key_use: Read, role: Public,
    docs: Docs {
        summary: "Answers what CL.THROTTLE would with quantity 0, without writing.",
        complexity: "O(1)",
        arity: -5,
        args: &[
            arg("key", Key),
            GCRA_LIMITER,
            flag("MS"),
            keyword("POLICY", "name", String),
        ],
    },
}
