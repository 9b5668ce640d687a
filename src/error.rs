//! Every error the module replies with, defined once with its exact text.

use cell_core::options::{shown, OptionError, Shown};
use cell_core::parse::{DurationError, ParseError};
use cell_core::ParamError;
use std::borrow::Cow;

/// A reason a command was refused. Nothing is written when one is returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmdError {
    /// Replied with the server's own wrong-arity error, which names the command.
    WrongArity,
    /// A fixed `-ERR ...` or `-WRONGTYPE ...` text.
    Reply(&'static str),
    /// `ERR unknown option 'word'`.
    UnknownOption(Shown),
    /// `ERR NAME given twice`.
    Twice(&'static str),
    /// `ERR NAME needs a value`.
    NeedsValue(&'static str),
    /// `ERR unknown policy 'name'`.
    UnknownPolicy(Shown),
    /// The server's own text for an unknown subcommand of a container
    /// command, also where the server has no subcommands (Redis 6.2).
    UnknownSubcommand(Shown),
    /// The wrong-arity text of a subcommand (`cl.policy|get`), as servers
    /// with subcommands word it, on every server.
    SubcommandArity(&'static str),
    /// `NOPERM`, for an operator's command the caller's rules leave out.
    NoPermission(Shown),
    /// A policy whose time zone this server cannot use.
    PolicyZone { policy: Shown, zone: Shown },
    /// A policy whose limiter this version does not read.
    PolicyUnreadable(Shown),
    /// `ERR policy 'name' has no trial`.
    NoTrial(Shown),
    /// A policy named by a command whose limiter is of another kind.
    PolicyKind {
        policy: Shown,
        holds: &'static str,
        takes: &'static str,
    },
}

impl CmdError {
    /// The error's text, for the cases that are not the server's own.
    pub fn text(&self) -> Option<Cow<'static, str>> {
        Some(match self {
            CmdError::WrongArity => return None,
            CmdError::Reply(text) => Cow::Borrowed(text),
            CmdError::UnknownOption(word) => {
                Cow::Owned(format!("ERR unknown option '{}'", word.as_str()))
            }
            CmdError::Twice(name) => Cow::Owned(format!("ERR {name} given twice")),
            CmdError::NeedsValue(name) => Cow::Owned(format!("ERR {name} needs a value")),
            CmdError::UnknownPolicy(name) => {
                Cow::Owned(format!("ERR unknown policy '{}'", name.as_str()))
            }
            CmdError::UnknownSubcommand(word) => Cow::Owned(format!(
                "ERR unknown subcommand '{}'. Try CL.POLICY HELP.",
                word.as_str()
            )),
            CmdError::SubcommandArity(name) => Cow::Owned(format!(
                "ERR wrong number of arguments for '{name}' command"
            )),
            CmdError::NoPermission(command) => Cow::Owned(format!(
                "NOPERM this user has no permissions to run the '{}' command",
                command.as_str()
            )),
            CmdError::PolicyUnreadable(policy) => Cow::Owned(format!(
                "ERR policy '{}' holds a limiter this version of redis-cell does not read: set it again",
                policy.as_str()
            )),
            CmdError::PolicyZone { policy, zone } => Cow::Owned(format!(
                "ERR policy '{}' uses the time zone '{}', which this server cannot read: set the policy again from a server that has the zone",
                policy.as_str(),
                zone.as_str()
            )),
            CmdError::NoTrial(name) => {
                Cow::Owned(format!("ERR policy '{}' has no trial", name.as_str()))
            }
            CmdError::PolicyKind {
                policy,
                holds,
                takes,
            } => Cow::Owned(format!(
                "ERR policy '{}' holds a {holds} limiter, not the {takes} of this command",
                policy.as_str()
            )),
        })
    }
}

pub const NOT_INTEGER: CmdError = CmdError::Reply("ERR value is not an integer or out of range");
pub const WRONG_TYPE: CmdError =
    CmdError::Reply("WRONGTYPE Operation against a key holding the wrong kind of value");
pub const NEGATIVE_MAX_BURST: CmdError =
    CmdError::Reply("ERR invalid max_burst: must be 0 or greater");
pub const COUNT_NOT_POSITIVE: CmdError =
    CmdError::Reply("ERR invalid count_per_period: must be 1 or greater");
pub const PERIOD_NOT_POSITIVE: CmdError =
    CmdError::Reply("ERR invalid period: must be greater than 0 seconds");
pub const NEGATIVE_QUANTITY: CmdError =
    CmdError::Reply("ERR invalid quantity: must be 0 or greater");
pub const RATE_TOO_HIGH: CmdError = CmdError::Reply(
    "ERR invalid count_per_period: more than one request per nanosecond over period",
);
pub const OVERFLOW: CmdError =
    CmdError::Reply("ERR parameters out of range: their nanosecond arithmetic overflows 64 bits");
pub const INVALID_TAT: CmdError = CmdError::Reply(
    "ERR key holds a string that is not a valid CL.THROTTLE state (an integer TAT in nanoseconds)",
);
pub const SYNTAX: CmdError = CmdError::Reply("ERR syntax error");
/// `GCRA` (the opt-in command of Redis 8.8's milestones) reads its
/// arguments as the milestone does, with its texts.
pub const GCRA_NEGATIVE: CmdError = CmdError::Reply("ERR value is out of range, must be positive");
pub const GCRA_RANGE: CmdError =
    CmdError::Reply("ERR value is out of range, value must between 1 and 9223372036854775807");
pub const GCRA_NOT_FLOAT: CmdError = CmdError::Reply("ERR value is not a valid float");
pub const GCRA_PERIOD_RANGE: CmdError = CmdError::Reply("ERR period must be > 0 and < 1e12");
pub const GCRA_MISSING_TOKENS: CmdError = CmdError::Reply("ERR Missing TOKENS value");
/// Where the milestone would round the emission interval up to 1 µs, the
/// module's nanosecond state has no such floor.
pub const GCRA_RATE_TOO_HIGH: CmdError = CmdError::Reply(
    "ERR invalid tokens_per_period: more than one token per nanosecond over period",
);
pub const NEGATIVE_LIMIT: CmdError = CmdError::Reply("ERR invalid limit: must be 0 or greater");
pub const WINDOW_NOT_POSITIVE: CmdError =
    CmdError::Reply("ERR invalid window: must be greater than 0 seconds");
pub const INVALID_COUNTER: CmdError =
    CmdError::Reply("ERR key holds a string that is not a valid FW.INCR counter (an integer)");
pub const EXACT_KEY: CmdError =
    CmdError::Reply("ERR key holds an exact sliding window; APPROX needs a key of its own");
pub const APPROX_KEY: CmdError =
    CmdError::Reply("ERR key holds an APPROX sliding window; the exact log needs a key of its own");
pub const BAD_RECORD: CmdError = CmdError::Reply(
    "ERR invalid SW.RECORD: needs window >= 1, at >= 0 and not before the newest entry, quantity >= 1",
);
pub const BAD_PAYLOAD: CmdError =
    CmdError::Reply("ERR invalid SW.LOAD payload: not a serialized sliding window");
pub const PAYLOAD_WITHOUT_WINDOW: CmdError = CmdError::Reply(
    "ERR invalid SW.LOAD payload: written without its window (by redis-cell's first release), so its expiry is unknown",
);
pub const BAD_NUMKEYS: CmdError = CmdError::Reply(
    "ERR invalid numkeys: must be a positive integer, with a key and a limiter for each",
);
pub const TOO_MANY_KEYS: CmdError =
    CmdError::Reply("ERR invalid numkeys: at most 100 limiters in one call");
pub const LIMITER_COUNT: CmdError =
    CmdError::Reply("ERR CL.THROTTLEALL needs exactly numkeys limiters, one for each key");
pub const UNKNOWN_LIMITER: CmdError =
    CmdError::Reply("ERR unknown limiter: expected GCRA, SW or FW");
pub const KEY_TWICE: CmdError =
    CmdError::Reply("ERR a key is named twice: each limiter needs a key of its own");
pub const MAXWAIT_MISSING: CmdError = CmdError::Reply(
    "ERR CL.RESERVE needs MAXWAIT seconds: the longest the caller will wait for its slot",
);
pub const NEGATIVE_MAXWAIT: CmdError = CmdError::Reply("ERR invalid MAXWAIT: must be 0 or greater");
pub const BAD_UNRECORD: CmdError =
    CmdError::Reply("ERR invalid SW.UNRECORD: needs window >= 1, at >= 0, quantity >= 1");
pub const BAD_TZ: CmdError = CmdError::Reply(
    "ERR invalid TZ: expected a time zone name such as Europe/Berlin, or an offset from -12:00 to +14:00 such as +09:00",
);
pub const TZ_WITHOUT_CALENDAR: CmdError =
    CmdError::Reply("ERR TZ needs a calendar window: minute, hour, day, week, month or year");
pub const LEASE_NOT_POSITIVE: CmdError =
    CmdError::Reply("ERR invalid lease: must be greater than 0 seconds");
pub const ID_TOO_LONG: CmdError = CmdError::Reply("ERR invalid ID: at most 1024 bytes");
pub const BAD_HOLD: CmdError =
    CmdError::Reply("ERR invalid CC.HOLD: needs now >= 0 and an expiry after now");
pub const BAD_DROP: CmdError = CmdError::Reply("ERR invalid CC.DROP: needs now >= 0");
pub const BAD_LEASES: CmdError =
    CmdError::Reply("ERR invalid CC.LOAD payload: not serialized leases");
pub const BAD_PERIOD: CmdError = CmdError::Reply(
    "ERR invalid period: expected seconds or a number with a unit: ms, s, m, h or d",
);
pub const BAD_WINDOW: CmdError = CmdError::Reply(
    "ERR invalid window: expected seconds or a number with a unit: ms, s, m, h or d",
);
pub const BAD_LEASE: CmdError = CmdError::Reply(
    "ERR invalid lease: expected seconds or a number with a unit: ms, s, m, h or d",
);
pub const BAD_MAXWAIT: CmdError = CmdError::Reply(
    "ERR invalid MAXWAIT: expected seconds or a number with a unit: ms, s, m, h or d",
);
pub const BAD_POLICY_NAME: CmdError =
    CmdError::Reply("ERR invalid policy name: 1 to 64 bytes of letters, digits, '_', '.' and '-'");
pub const TOO_MANY_POLICIES: CmdError =
    CmdError::Reply("ERR too many policies: at most 10000; delete one first");
pub const POLICY_LIMITER_WORDS: CmdError = CmdError::Reply(
    "ERR a policy holds one limiter: GCRA max_burst count_per_period period, SW limit window [APPROX] or FW limit window-or-unit [ALIGN] [TZ zone]",
);
pub const POLICY_KIND_CHANGE: CmdError = CmdError::Reply(
    "ERR a policy keeps its kind (GCRA, SW, SW APPROX or FW), which its keys hold: DEL it first, or use a new name",
);
/// The server's answers to a write it refuses, for the checks `CL.POLICY
/// SET` and `DEL` make themselves where the server has no subcommands.
pub const OOM: CmdError =
    CmdError::Reply("OOM command not allowed when used memory > 'maxmemory'.");
pub const NOREPLICAS: CmdError = CmdError::Reply("NOREPLICAS Not enough good replicas to write.");
pub const TRIAL_KIND: CmdError = CmdError::Reply(
    "ERR a trial has the policy's kind (GCRA, SW, SW APPROX or FW), so that PROMOTE can apply it to the policy's keys",
);
pub const TRIAL_WITHOUT_POLICY: CmdError = CmdError::Reply("ERR TRIAL needs POLICY name");
pub const BAD_TOP_COUNT: CmdError = CmdError::Reply("ERR invalid COUNT: must be 1 or greater");
pub const READONLY_REPLICA: CmdError =
    CmdError::Reply("READONLY You can't write against a read only replica.");
pub const INTERNAL: CmdError =
    CmdError::Reply("ERR internal error in redis-cell; the command was not applied");

/// `ERR unknown subcommand 'word'. Try CL.POLICY HELP.`
pub fn unknown_subcommand(word: &[u8]) -> CmdError {
    CmdError::UnknownSubcommand(shown(word))
}

/// A policy whose zone this server cannot read.
pub fn policy_zone(policy: &[u8], zone: &[u8]) -> CmdError {
    CmdError::PolicyZone {
        policy: shown(policy),
        zone: shown(zone),
    }
}

/// A policy whose limiter this version does not read.
pub fn policy_unreadable(policy: &[u8]) -> CmdError {
    CmdError::PolicyUnreadable(shown(policy))
}

/// `ERR policy 'name' has no trial`, the name shown safely.
pub fn no_trial(name: &[u8]) -> CmdError {
    CmdError::NoTrial(shown(name))
}

/// A policy of another kind than the command naming it: what each holds
/// (`GCRA`, `SW`, `SW APPROX`, `FW`).
pub fn policy_kind(policy: &[u8], holds: &'static str, takes: &'static str) -> CmdError {
    CmdError::PolicyKind {
        policy: shown(policy),
        holds,
        takes,
    }
}

/// `ERR unknown policy 'name'`, the name shown safely.
pub fn unknown_policy(name: &[u8]) -> CmdError {
    CmdError::UnknownPolicy(shown(name))
}

impl From<ParseError> for CmdError {
    fn from(_: ParseError) -> Self {
        NOT_INTEGER
    }
}

impl From<OptionError<'_>> for CmdError {
    fn from(e: OptionError) -> Self {
        match e {
            OptionError::Unknown(word) => CmdError::UnknownOption(shown(word)),
            OptionError::Twice(name) => CmdError::Twice(name),
            OptionError::NeedsValue(name) => CmdError::NeedsValue(name),
            OptionError::NotInteger => NOT_INTEGER,
            OptionError::NegativeQuantity => NEGATIVE_QUANTITY,
        }
    }
}

/// A duration argument: `malformed` names the argument.
pub fn duration(word: &[u8], malformed: CmdError) -> Result<i64, CmdError> {
    cell_core::parse::duration(word).map_err(|e| match e {
        DurationError::Malformed => malformed,
        DurationError::OutOfRange => OVERFLOW,
    })
}

impl From<ParamError> for CmdError {
    fn from(e: ParamError) -> Self {
        match e {
            ParamError::ZeroEmissionInterval => RATE_TOO_HIGH,
            ParamError::Overflow => OVERFLOW,
        }
    }
}
