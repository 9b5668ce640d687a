//! The vocabulary of what `COMMAND DOCS` shows for each command, on servers
//! that accept command info; each command's own docs are declared beside
//! its handler (`command!`).

/// One argument as documented.
pub struct Arg {
    pub name: &'static str,
    pub kind: ArgKind,
    pub optional: bool,
    /// Given one or more times.
    pub multiple: bool,
    /// A keyword that comes before the value (`QUANTITY q`), or the word of
    /// a flag or of a block (`GCRA ...`).
    pub token: Option<&'static str>,
}

#[derive(Clone, Copy)]
pub enum ArgKind {
    Key,
    Integer,
    /// A duration: seconds, or a number with a unit (`500ms`, `15m`).
    Duration,
    /// A floating-point number (`GCRA`'s period).
    Double,
    /// A flag: only its token.
    Token,
    String,
    /// Exactly one of these.
    OneOf(&'static [Arg]),
    /// All of these, in this order.
    Block(&'static [Arg]),
    /// These arguments in place, as if written out here: a run several
    /// commands share (a limiter's parameters). Not an argument itself.
    Inline(&'static [Arg]),
}

pub struct Docs {
    pub summary: &'static str,
    pub complexity: &'static str,
    /// Negative: at least that many words, as Redis counts arity.
    pub arity: i32,
    pub args: &'static [Arg],
}

pub const fn arg(name: &'static str, kind: ArgKind) -> Arg {
    Arg {
        name,
        kind,
        optional: false,
        multiple: false,
        token: None,
    }
}

pub const fn optional(name: &'static str, kind: ArgKind) -> Arg {
    Arg {
        optional: true,
        ..arg(name, kind)
    }
}

pub const fn multiple(name: &'static str, kind: ArgKind) -> Arg {
    Arg {
        multiple: true,
        ..arg(name, kind)
    }
}

/// A flag written as its own word (`MS`, `APPROX`).
pub const fn flag(word: &'static str) -> Arg {
    Arg {
        optional: true,
        token: Some(word),
        ..arg(word, Token)
    }
}

/// A word that must be given as one of a choice (`GCRA`, `day`).
pub const fn word(word: &'static str) -> Arg {
    Arg {
        token: Some(word),
        ..arg(word, Token)
    }
}

/// Arguments that follow a word of their own (`GCRA max_burst ...`).
pub const fn block(word: &'static str, args: &'static [Arg]) -> Arg {
    Arg {
        token: Some(word),
        ..arg(word, Block(args))
    }
}

/// Arguments shared by several commands, in place (see [`ArgKind::Inline`]).
pub const fn inline(args: &'static [Arg]) -> Arg {
    arg("", Inline(args))
}

pub const fn keyword_required(token: &'static str, name: &'static str, kind: ArgKind) -> Arg {
    Arg {
        token: Some(token),
        ..arg(name, kind)
    }
}

pub const fn keyword(token: &'static str, name: &'static str, kind: ArgKind) -> Arg {
    Arg {
        optional: true,
        token: Some(token),
        ..arg(name, kind)
    }
}

use ArgKind::*;

/// The parameters of a GCRA limiter, as `CL.THROTTLE` takes them.
pub const GCRA_LIMITER: Arg = inline(&[
    arg("max_burst", Integer),
    arg("count_per_period", Integer),
    arg("period", Duration),
]);

/// The parameters of a sliding window limiter, as `SW.ALLOW` takes them
/// (its `APPROX` flag apart).
pub const SW_LIMITER: Arg = inline(&[arg("limit", Integer), arg("window", Duration)]);

/// The parameters of a fixed window limiter, as `FW.INCR` takes them,
/// and its `COUNTALL` flag (every hit counted, refused or not).
pub const FW_LIMITER: Arg = inline(&[arg("limit", Integer), WINDOW_OR_UNIT, flag("COUNTALL")]);

/// A fixed window's length (`ALIGN` to start windows at multiples of it
/// since the Unix epoch), or a calendar unit in a time zone.
pub const WINDOW_OR_UNIT: Arg = arg(
    "window_or_unit",
    OneOf(&[
        arg("fixed", Block(&[arg("window", Duration), flag("ALIGN")])),
        arg(
            "calendar",
            Block(&[CALENDAR_UNIT, keyword("TZ", "zone", String)]),
        ),
    ]),
);

pub const CALENDAR_UNIT: Arg = arg(
    "unit",
    OneOf(&[
        word("minute"),
        word("hour"),
        word("day"),
        word("week"),
        word("month"),
        word("year"),
    ]),
);

/// What a command's docs are written with (`command!` brings it into
/// scope for them).
pub mod vocabulary {
    pub use super::ArgKind::{self, *};
    pub use super::{
        arg, block, flag, keyword, keyword_required, multiple, optional, word, Docs, CALENDAR_UNIT,
        FW_LIMITER, GCRA_LIMITER, SW_LIMITER,
    };
}
