//! What `COMMAND DOCS` shows for each command, on servers that accept
//! command info.

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
}

pub struct Docs {
    pub summary: &'static str,
    pub complexity: &'static str,
    /// Negative: at least that many words, as Redis counts arity.
    pub arity: i32,
    pub args: &'static [Arg],
}

const fn arg(name: &'static str, kind: ArgKind) -> Arg {
    Arg {
        name,
        kind,
        optional: false,
        multiple: false,
        token: None,
    }
}

const fn optional(name: &'static str, kind: ArgKind) -> Arg {
    Arg {
        optional: true,
        ..arg(name, kind)
    }
}

const fn multiple(name: &'static str, kind: ArgKind) -> Arg {
    Arg {
        multiple: true,
        ..arg(name, kind)
    }
}

/// A flag written as its own word (`MS`, `APPROX`).
const fn flag(word: &'static str) -> Arg {
    Arg {
        optional: true,
        token: Some(word),
        ..arg(word, Token)
    }
}

/// A word that must be given as one of a choice (`GCRA`, `day`).
const fn word(word: &'static str) -> Arg {
    Arg {
        token: Some(word),
        ..arg(word, Token)
    }
}

/// Arguments that follow a word of their own (`GCRA max_burst ...`).
const fn block(word: &'static str, args: &'static [Arg]) -> Arg {
    Arg {
        token: Some(word),
        ..arg(word, Block(args))
    }
}

const fn keyword_required(token: &'static str, name: &'static str, kind: ArgKind) -> Arg {
    Arg {
        token: Some(token),
        ..arg(name, kind)
    }
}

const fn keyword(token: &'static str, name: &'static str, kind: ArgKind) -> Arg {
    Arg {
        optional: true,
        token: Some(token),
        ..arg(name, kind)
    }
}

use ArgKind::*;

/// A fixed window's length (`ALIGN` to start windows at multiples of it
/// since the Unix epoch), or a calendar unit in a time zone.
const WINDOW_OR_UNIT: Arg = arg(
    "window_or_unit",
    OneOf(&[
        arg("fixed", Block(&[arg("window", Duration), flag("ALIGN")])),
        arg(
            "calendar",
            Block(&[CALENDAR_UNIT, keyword("TZ", "zone", String)]),
        ),
    ]),
);

const CALENDAR_UNIT: Arg = arg(
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

pub const CL_THROTTLE: Docs = Docs {
    summary: "Rate-limits a key with GCRA (redis-cell compatible): admits `quantity` or refuses, and answers [limited, limit, remaining, retry_after, reset_after] (durations in seconds, or ms with MS).",
    complexity: "O(1)",
    arity: -5,
    args: &[
        arg("key", Key),
        arg("max_burst", Integer),
        arg("count_per_period", Integer),
        arg("period", Duration),
        optional("quantity", Integer),
        flag("MS"),
        flag("SHADOW"),
    ],
};

pub const CL_PEEK: Docs = Docs {
    summary: "Answers what CL.THROTTLE would with quantity 0, without writing.",
    complexity: "O(1)",
    arity: -5,
    args: &[
        arg("key", Key),
        arg("max_burst", Integer),
        arg("count_per_period", Integer),
        arg("period", Duration),
        flag("MS"),
    ],
};

pub const CL_THROTTLEALL: Docs = Docs {
    summary: "Several limits in one atomic, all-or-nothing call: each limiter (GCRA, SW or FW, with the parameters of CL.THROTTLE, SW.ALLOW or FW.INCR) decides for its key; all keys are written only if all allow. Answers the binding limiter's [limited, limit, remaining, retry_after, reset_after] and its 1-based index.",
    complexity: "O(N) in the limiters (at most 100), each as its own command",
    arity: -5,
    args: &[
        arg("numkeys", Integer),
        multiple("key", Key),
        multiple(
            "limiter",
            OneOf(&[
                block(
                    "GCRA",
                    &[
                        arg("max_burst", Integer),
                        arg("count_per_period", Integer),
                        arg("period", Duration),
                    ],
                ),
                block(
                    "SW",
                    &[arg("limit", Integer), arg("window", Duration), flag("APPROX")],
                ),
                block("FW", &[arg("limit", Integer), WINDOW_OR_UNIT]),
                block("POLICY", &[arg("name", ArgKind::String)]),
            ]),
        ),
        keyword("QUANTITY", "q", Integer),
        flag("MS"),
        flag("SHADOW"),
    ],
};

pub const CL_RESERVE: Docs = Docs {
    summary: "GCRA as a queue: admits now as CL.THROTTLE, or takes the next slot when it comes within MAXWAIT and answers [0, limit, remaining, wait, reset_after] (wait rounded up), or refuses as CL.THROTTLE.",
    complexity: "O(1)",
    arity: -5,
    args: &[
        arg("key", Key),
        arg("max_burst", Integer),
        arg("count_per_period", Integer),
        arg("period", Duration),
        optional("quantity", Integer),
        keyword_required("MAXWAIT", "duration", Duration),
        flag("MS"),
    ],
};

pub const CL_REFUND: Docs = Docs {
    summary: "Gives back up to `quantity` to a CL.THROTTLE bucket (never beyond full; a full bucket's key is deleted), and answers what CL.PEEK answers afterwards.",
    complexity: "O(1)",
    arity: -6,
    args: &[
        arg("key", Key),
        arg("max_burst", Integer),
        arg("count_per_period", Integer),
        arg("period", Duration),
        arg("quantity", Integer),
        flag("MS"),
    ],
};

pub const SW_REFUND: Docs = Docs {
    summary: "Gives back up to `quantity` to a sliding window (newest requests first; with APPROX, the current window's count, then the previous one's), and answers what SW.PEEK answers afterwards.",
    complexity: "O(1) amortised; O(C) per 12 KiB chunk of the log given back",
    arity: -5,
    args: &[
        arg("key", Key),
        arg("limit", Integer),
        arg("window", Duration),
        arg("quantity", Integer),
        flag("APPROX"),
        flag("MS"),
    ],
};

pub const FW_REFUND: Docs = Docs {
    summary: "Gives back up to `quantity` to a fixed window counter (not below 0, keeping its window's end), and answers what FW.PEEK answers afterwards.",
    complexity: "O(1)",
    arity: -5,
    args: &[
        arg("key", Key),
        arg("limit", Integer),
        arg(
            "window_or_unit",
            OneOf(&[arg("window", Duration), CALENDAR_UNIT]),
        ),
        arg("quantity", Integer),
        flag("ALIGN"),
        keyword("TZ", "zone", String),
        flag("MS"),
    ],
};

pub const SW_UNRECORD: Docs = Docs {
    summary: "Gives back `quantity` in a sliding window at an explicit time (the effect SW.REFUND replicates).",
    complexity: "O(1) amortised",
    arity: -4,
    args: &[
        arg("key", Key),
        arg("window_ns", Integer),
        arg("at_ns", Integer),
        optional("quantity", Integer),
        flag("APPROX"),
    ],
};

pub const SW_ALLOW: Docs = Docs {
    summary: "Exact sliding window limit (or, with APPROX, the sliding window counter): admits `quantity` or refuses, and answers [limited, limit, remaining, retry_after, reset_after].",
    complexity: "O(1) amortised; O(C) at worst, C the entries of one 12 KiB chunk of the log",
    arity: -4,
    args: &[
        arg("key", Key),
        arg("limit", Integer),
        arg("window", Duration),
        optional("quantity", Integer),
        flag("APPROX"),
        flag("MS"),
        flag("SHADOW"),
    ],
};

pub const SW_PEEK: Docs = Docs {
    summary: "Answers what SW.ALLOW would with quantity 0, without writing.",
    complexity: "O(1) amortised; O(C) at worst, C the entries of one 12 KiB chunk of the log",
    arity: -4,
    args: &[
        arg("key", Key),
        arg("limit", Integer),
        arg("window", Duration),
        flag("APPROX"),
        flag("MS"),
    ],
};

pub const FW_INCR: Docs = Docs {
    summary: "Fixed window counter: admits `quantity` or refuses, and answers [limited, limit, remaining, retry_after, reset_after]. The window is a duration, or a calendar unit (minute, hour, day, week, month, year) in an optional time zone (TZ: a zone name such as Europe/Berlin, or an offset).",
    complexity: "O(1)",
    arity: -4,
    args: &[
        arg("key", Key),
        arg("limit", Integer),
        WINDOW_OR_UNIT,
        optional("quantity", Integer),
        flag("MS"),
        flag("SHADOW"),
    ],
};

pub const FW_PEEK: Docs = Docs {
    summary: "Answers what FW.INCR would with quantity 0, without writing.",
    complexity: "O(1)",
    arity: -4,
    args: &[
        arg("key", Key),
        arg("limit", Integer),
        WINDOW_OR_UNIT,
        flag("MS"),
    ],
};

pub const SW_RECORD: Docs = Docs {
    summary: "Records a request in a sliding window at an explicit time (the effect SW.ALLOW replicates).",
    complexity: "O(1) amortised",
    arity: -4,
    args: &[
        arg("key", Key),
        arg("window_ns", Integer),
        arg("at_ns", Integer),
        optional("quantity", Integer),
        flag("APPROX"),
    ],
};

pub const SW_LOAD: Docs = Docs {
    summary: "Replaces a sliding window with a serialized one (what an AOF rewrite emits), expiring when its newest request leaves the window.",
    complexity: "O(N) in the entries",
    arity: 3,
    args: &[arg("key", Key), arg("payload", String)],
};

pub const CC_ACQUIRE: Docs = Docs {
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
};

pub const CC_RELEASE: Docs = Docs {
    summary:
        "Releases the lease `id` holds: 1 if it held one, 0 if not (expired, released, unknown).",
    complexity: "O(N) in the leases held",
    arity: -3,
    args: &[arg("key", Key), arg("id", String)],
};

pub const CC_RENEW: Docs = Docs {
    summary: "Extends the lease `id` holds to `lease` from now: 1 if it held one, 0 if not (the slot is lost).",
    complexity: "O(N) in the leases held",
    arity: -4,
    args: &[arg("key", Key), arg("id", String), arg("lease", Duration)],
};

pub const CC_PEEK: Docs = Docs {
    summary: "Answers [limited, limit, remaining, retry_after, reset_after] for the leases held now, without writing.",
    complexity: "O(N) in the leases held",
    arity: -3,
    args: &[arg("key", Key), arg("limit", Integer), flag("MS")],
};

pub const CC_HOLD: Docs = Docs {
    summary: "Holds a lease until an explicit time after dropping those expired at `now_ns` (the effect CC.ACQUIRE and CC.RENEW replicate).",
    complexity: "O(N) in the leases held",
    arity: 5,
    args: &[
        arg("key", Key),
        arg("id", String),
        arg("expires_at_ns", Integer),
        arg("now_ns", Integer),
    ],
};

pub const CC_DROP: Docs = Docs {
    summary: "Releases a lease after dropping those expired at `now_ns` (the effect CC.RELEASE replicates).",
    complexity: "O(N) in the leases held",
    arity: 4,
    args: &[arg("key", Key), arg("id", String), arg("now_ns", Integer)],
};

pub const CC_LOAD: Docs = Docs {
    summary: "Replaces a key's leases with serialized ones (what an AOF rewrite emits), expiring with the last lease.",
    complexity: "O(N) in the leases",
    arity: 3,
    args: &[arg("key", Key), arg("payload", String)],
};

pub const CL_LIMIT: Docs = Docs {
    summary: "Applies a named policy's limiter (see CL.POLICY) to a key: decides, writes and answers exactly as that limiter given as arguments, counts the call for the policy and records a refusal for CL.TOP.",
    complexity: "O(1), as the policy's limiter",
    arity: -3,
    args: &[
        arg("key", Key),
        arg("policy", ArgKind::String),
        optional("quantity", Integer),
        flag("MS"),
        flag("SHADOW"),
    ],
};

pub const CL_POLICY: Docs = Docs {
    summary: "Named policies: SET name limiter [SHADOW] [TRIAL limiter] creates or replaces one (live, no reset), with a trial limiter run in shadow beside it; GET name answers its limiters, shadow flag and counters; PROMOTE name makes the trial the limit; DEL name removes it; LIST names them all. Server configuration, not keys: saved in RDB, replicated, per node in a cluster.",
    complexity: "O(1); LIST O(N log N) in the policies",
    arity: -2,
    args: &[
        arg(
            "subcommand",
            OneOf(&[
                block(
                    "SET",
                    &[
                        arg("name", ArgKind::String),
                        arg("limiter", ArgKind::String),
                        flag("SHADOW"),
                        keyword("TRIAL", "limiter", ArgKind::String),
                    ],
                ),
                block("GET", &[arg("name", ArgKind::String)]),
                block("DEL", &[arg("name", ArgKind::String)]),
                block("PROMOTE", &[arg("name", ArgKind::String)]),
                word("LIST"),
                word("HELP"),
            ]),
        ),
    ],
};

// The subcommands, where the server has subcommands. Their arity stays the
// server's default for a subcommand (at least the two words), so that the
// handler checks the rest and answers the same texts on every server.

pub const CL_POLICY_SET: Docs = Docs {
    summary:
        "Creates or replaces the named policy (live, no reset); a write: replicated and saved.",
    complexity: "O(1)",
    arity: 0,
    args: &[
        arg("name", ArgKind::String),
        arg("limiter", ArgKind::String),
        flag("SHADOW"),
        keyword("TRIAL", "limiter", ArgKind::String),
    ],
};

pub const CL_POLICY_PROMOTE: Docs = Docs {
    summary: "Makes the named policy's trial its limiter (live, as SET), and ends the trial; a write: replicated and saved.",
    complexity: "O(1)",
    arity: 0,
    args: &[arg("name", ArgKind::String)],
};

pub const CL_POLICY_GET: Docs = Docs {
    summary: "Answers the named policy's limiter, shadow flag and counters.",
    complexity: "O(1)",
    arity: 0,
    args: &[arg("name", ArgKind::String)],
};

pub const CL_POLICY_DEL: Docs = Docs {
    summary: "Removes the named policy; answers 1, or 0 if there was none.",
    complexity: "O(1)",
    arity: 0,
    args: &[arg("name", ArgKind::String)],
};

pub const CL_POLICY_LIST: Docs = Docs {
    summary: "Names every policy, sorted.",
    complexity: "O(N log N) in the policies",
    arity: 0,
    args: &[],
};

pub const CL_POLICY_HELP: Docs = Docs {
    summary: "Lists the subcommands of CL.POLICY.",
    complexity: "O(1)",
    arity: 0,
    args: &[],
};

pub const CL_TOP: Docs = Docs {
    summary: "The keys refused most often (shadow refusals included), by all limiter commands, by one policy or by its trial, as [key, count, error, shadow] from a bounded Space-Saving summary; RESET empties it after answering.",
    complexity: "O(N) in the keys answered",
    arity: -1,
    args: &[
        keyword("COUNT", "n", Integer),
        keyword("POLICY", "name", ArgKind::String),
        flag("RESET"),
        flag("TRIAL"),
    ],
};

pub const GCRA: Docs = Docs {
    summary: "Redis 8.8's milestone GCRA command (opt-in: module argument gcra-command yes): CL.THROTTLE's decision, state and reply, with period a double in seconds and TOKENS count as the quantity.",
    complexity: "O(1)",
    arity: -5,
    args: &[
        arg("key", Key),
        arg("max_burst", Integer),
        arg("tokens_per_period", Integer),
        arg("period", Double),
        keyword("TOKENS", "count", Integer),
    ],
};
