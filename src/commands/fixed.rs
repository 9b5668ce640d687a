//! `FW.INCR key limit window [quantity] [ALIGN] [COUNTALL] [MS] [SHADOW] [POLICY name]` and
//! `FW.PEEK key limit window [ALIGN] [COUNTALL] [MS] [POLICY name]` (options in any order): a fixed window counter, stored
//! as a plain string integer with a TTL (what INCR + EXPIRE writes). A
//! calendar unit may replace the window: `FW.INCR key limit month
//! TZ +09:00 ...`.

use super::{limit_command, peek_command};
use crate::limiter::Kind;

command! {
    FW_INCR: "fw.incr" => |ctx, args| limit_command(ctx, args, Kind::Fixed),
    flags: super::WRITE,
    keys: First, key_use: ReadUpdate, role: Public,
    docs: Docs {
        summary: "Fixed window counter: admits `quantity` or refuses, and answers [limited, limit, remaining, retry_after, reset_after]. The window is a duration, or a calendar unit (minute, hour, day, week, month, year) in an optional time zone (TZ: a zone name such as Europe/Berlin, or an offset).",
        complexity: "O(1)",
        arity: -4,
        args: &[
            arg("key", Key),
            FW_LIMITER,
            optional("quantity", Integer),
            flag("MS"),
            flag("SHADOW"),
            keyword("POLICY", "name", String),
        ],
    },
}

command! {
    FW_PEEK: "fw.peek" => |ctx, args| peek_command(ctx, args, Kind::Fixed),
    flags: super::READ,
    keys: First, key_use: Read, role: Public,
    docs: Docs {
        summary: "Answers what FW.INCR would with quantity 0, without writing.",
        complexity: "O(1)",
        arity: -4,
        args: &[
            arg("key", Key),
            FW_LIMITER,
            flag("MS"),
            keyword("POLICY", "name", String),
        ],
    },
}
