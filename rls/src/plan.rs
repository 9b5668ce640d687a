//! What one request sends to Redis, and what the replies mean: cache keys
//! with the reference's names, the redis-cell commands of each mode, and
//! the per-descriptor outcome read back from the replies. Pure.

use crate::config::{Algorithm, Entry, RateLimit};

/// The counter limit of the reference mode: the counter always grows, as the
/// reference's `INCRBY` does, and the service compares it with the limit.
/// Far below 2^63 so that no count a real fleet reaches overflows it.
pub const COUNTING_LIMIT: i64 = 1 << 62;

/// How a request's descriptors are charged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// As the reference: every limited descriptor's counter is incremented
    /// by its hits, refused or not, in one pipeline.
    Reference,
    /// The descriptors are charged together or not at all, in one
    /// `CL.THROTTLEALL` (with `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT`, or
    /// `ALL_OR_NOTHING`): a refused request writes nothing.
    AllOrNothing,
}

/// The window start (seconds since the epoch) of a fixed window of
/// `window` seconds: the reference's `(now / divider) * divider`.
pub fn window_start(now_secs: u64, window: u64) -> u64 {
    if window == 0 {
        return now_secs;
    }
    (now_secs / window) * window
}

/// The reference's cache key: `prefix + domain + "_" + (key "_" value "_")*`
/// followed by the window start for fixed windows. Sliding windows and GCRA
/// have no window start (their state rolls); they end in `sw` or `gcra`
/// so they never share a key with a fixed window counter.
pub fn cache_key(
    prefix: &str,
    hash_tag: Option<&str>,
    domain: &str,
    entries: &[Entry],
    limit: &RateLimit,
    now_secs: u64,
) -> String {
    let mut k = String::with_capacity(64);
    if let Some(tag) = hash_tag {
        k.push('{');
        k.push_str(tag);
        k.push('}');
    }
    k.push_str(prefix);
    k.push_str(domain);
    k.push('_');
    for (i, e) in entries.iter().enumerate() {
        k.push_str(&e.key);
        k.push('_');
        let shared = limit
            .share_threshold_pattern
            .as_ref()
            .and_then(|p| p.get(i))
            .filter(|p| !p.is_empty());
        k.push_str(shared.map(String::as_str).unwrap_or(&e.value));
        k.push('_');
    }
    match limit.algorithm {
        Algorithm::FixedWindow => {
            k.push_str(&window_start(now_secs, limit.window_seconds()).to_string())
        }
        Algorithm::SlidingWindow => k.push_str("sw"),
        Algorithm::Gcra => k.push_str("gcra"),
    }
    k
}

/// One limited descriptor of a request.
#[derive(Clone, Debug, PartialEq)]
pub struct Charge {
    /// Its position in the request.
    pub index: usize,
    pub key: String,
    pub limit: RateLimit,
    pub hits: u64,
}

/// The limiter words of a charge, as `CL.THROTTLEALL` and the single
/// commands take them after the key.
fn limiter_words(c: &Charge, counting: bool) -> (&'static str, Vec<String>) {
    let window = c.limit.window_seconds().to_string();
    let rpu = c.limit.requests_per_unit;
    match c.limit.algorithm {
        Algorithm::FixedWindow => {
            let limit = if counting {
                COUNTING_LIMIT.to_string()
            } else {
                rpu.to_string()
            };
            ("FW", vec![limit, window, "ALIGN".into()])
        }
        Algorithm::SlidingWindow => ("SW", vec![rpu.to_string(), window]),
        Algorithm::Gcra => {
            let burst = if c.limit.burst > 0 {
                c.limit.burst
            } else {
                rpu.saturating_sub(1)
            };
            ("GCRA", vec![burst.to_string(), rpu.to_string(), window])
        }
    }
}

fn single(c: &Charge, counting: bool, shadow: bool) -> Vec<String> {
    let (kind, words) = limiter_words(c, counting);
    let cmd = match kind {
        "FW" => "FW.INCR",
        "SW" => "SW.ALLOW",
        _ => "CL.THROTTLE",
    };
    // FW's ALIGN is an option; the quantity goes after the positional words.
    let mut out = vec![cmd.to_string(), c.key.clone()];
    let (pos, opts): (Vec<String>, Vec<String>) =
        words.into_iter().partition(|w| w.as_str() != "ALIGN");
    out.extend(pos);
    out.push(c.hits.to_string());
    out.extend(opts);
    if shadow {
        out.push("SHADOW".into());
    }
    out
}

fn peek(c: &Charge) -> Vec<String> {
    let (kind, words) = limiter_words(c, false);
    let cmd = match kind {
        "FW" => "FW.PEEK",
        "SW" => "SW.PEEK",
        _ => "CL.PEEK",
    };
    let mut out = vec![cmd.to_string(), c.key.clone()];
    out.extend(words);
    out
}

/// The commands of one request, sent as one pipeline (`atomic`: inside
/// `MULTI`/`EXEC`), and how to read their replies.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub commands: Vec<Vec<String>>,
    pub atomic: bool,
    /// Whether all keys must be charged together (one slot in a cluster).
    pub all_or_nothing: bool,
    /// Ranges of commands that must run together (a peek and its shadow
    /// command), for a cluster, where keys of one plan may be on several nodes.
    pub groups: Vec<std::ops::Range<usize>>,
    steps: Vec<Step>,
}

#[derive(Clone, Debug, PartialEq)]
enum Step {
    /// Reference mode, fixed window: one counting `FW.INCR`.
    Count { charge: usize },
    /// One enforcing single command (reference mode, extended algorithm).
    Single { charge: usize },
    /// A shadow charge: a peek, then the command with `SHADOW`.
    Shadow { charge: usize },
    /// `CL.THROTTLEALL` over the enforced charges, then a peek of each.
    All { charges: Vec<usize> },
}

/// One descriptor's result: the counts before and after (as the stats
/// need them) and whether it is over its limit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub index: usize,
    pub over: bool,
    pub before: u64,
    pub after: u64,
    /// What is left of the limit after this request (0 when over).
    pub remaining: u64,
    /// The limiter's capacity (`limit` in the reply).
    pub capacity: u64,
    /// The limiter's `reset_after` in seconds, when its reply has one
    /// (rolling windows and GCRA; a fixed window's is computed from the clock).
    pub reset_secs: Option<u64>,
}

pub fn plan(charges: &[Charge], mode: Mode) -> Plan {
    let mut commands = Vec::new();
    let mut steps = Vec::new();
    let mut ranges = Vec::new();
    let mut enforced = Vec::new();
    for (i, c) in charges.iter().enumerate() {
        let shadow_here = c.limit.shadow_mode
            && (mode == Mode::AllOrNothing || c.limit.algorithm != Algorithm::FixedWindow);
        if shadow_here {
            ranges.push(commands.len()..commands.len() + 2);
            commands.push(peek(c));
            commands.push(single(c, false, true));
            steps.push(Step::Shadow { charge: i });
        } else if mode == Mode::AllOrNothing {
            enforced.push(i);
        } else if c.limit.algorithm == Algorithm::FixedWindow {
            ranges.push(commands.len()..commands.len() + 1);
            commands.push(single(c, true, false));
            steps.push(Step::Count { charge: i });
        } else {
            ranges.push(commands.len()..commands.len() + 1);
            commands.push(single(c, false, false));
            steps.push(Step::Single { charge: i });
        }
    }
    // CL.THROTTLEALL takes one quantity: descriptors with different hits
    // (per-descriptor hits_addend) go in one call per quantity, each
    // all-or-nothing, all in one MULTI.
    let mut groups: Vec<(u64, Vec<usize>)> = Vec::new();
    for &i in &enforced {
        match groups.iter_mut().find(|(h, _)| *h == charges[i].hits) {
            Some((_, g)) => g.push(i),
            None => groups.push((charges[i].hits, vec![i])),
        }
    }
    for (hits, group) in groups {
        let mut cmd = vec!["CL.THROTTLEALL".to_string(), group.len().to_string()];
        for &i in &group {
            cmd.push(charges[i].key.clone());
        }
        for &i in &group {
            let (kind, words) = limiter_words(&charges[i], false);
            cmd.push(kind.to_string());
            cmd.extend(words);
        }
        cmd.push("QUANTITY".into());
        cmd.push(hits.to_string());
        commands.push(cmd);
        for &i in &group {
            commands.push(peek(&charges[i]));
        }
        steps.push(Step::All { charges: group });
    }
    Plan {
        all_or_nothing: mode == Mode::AllOrNothing,
        groups: ranges,
        atomic: mode == Mode::AllOrNothing
            || steps.iter().any(|s| matches!(s, Step::Shadow { .. })),
        commands,
        steps,
    }
}

/// A reply that is not what a redis-cell command answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadReply(pub String);

fn ints(reply: &[i64], n: usize, what: &str) -> Result<(), BadReply> {
    if reply.len() < n {
        return Err(BadReply(format!(
            "{what} answered {} integers, expected {n}",
            reply.len()
        )));
    }
    Ok(())
}

fn nonneg(x: i64) -> u64 {
    u64::try_from(x).unwrap_or(0)
}

/// Reads the replies (one list of integers per command, in order) into one
/// outcome per charge, in the charges' order.
pub fn interpret(
    plan: &Plan,
    charges: &[Charge],
    replies: &[Vec<i64>],
) -> Result<Vec<Outcome>, BadReply> {
    if replies.len() != plan.commands.len() {
        return Err(BadReply(format!(
            "{} replies for {} commands",
            replies.len(),
            plan.commands.len()
        )));
    }
    let mut out: Vec<Option<Outcome>> = vec![None; charges.len()];
    let mut r = replies.iter();
    let mut next = |what: &str, n: usize| -> Result<&Vec<i64>, BadReply> {
        let reply = r
            .next()
            .ok_or_else(|| BadReply(format!("missing reply to {what}")))?;
        ints(reply, n, what)?;
        Ok(reply)
    };
    for step in &plan.steps {
        match step {
            Step::Count { charge } => {
                let c = &charges[*charge];
                let reply = next("FW.INCR", 5)?;
                let after = nonneg(COUNTING_LIMIT.saturating_sub(reply[2]));
                let limit = u64::from(c.limit.requests_per_unit);
                out[*charge] = Some(Outcome {
                    index: c.index,
                    over: after > limit,
                    before: after.saturating_sub(c.hits),
                    after,
                    remaining: limit.saturating_sub(after),
                    capacity: limit,
                    reset_secs: None,
                });
            }
            Step::Single { charge } => {
                let c = &charges[*charge];
                let reply = next("limiter", 5)?;
                out[*charge] = Some(enforced_outcome(
                    c,
                    reply[0] != 0,
                    nonneg(reply[1]),
                    nonneg(reply[2]),
                    nonneg(reply[4]),
                ));
            }
            Step::Shadow { charge } => {
                let c = &charges[*charge];
                let peeked = next("peek", 5)?;
                let reset = nonneg(next("shadow limiter", 5)?[4]);
                let capacity = nonneg(peeked[1]);
                let before_remaining = nonneg(peeked[2]);
                let over = c.hits > before_remaining;
                let remaining = if over {
                    before_remaining
                } else {
                    before_remaining - c.hits
                };
                out[*charge] = Some(enforced_outcome(c, over, capacity, remaining, reset));
            }
            Step::All { charges: idx } => {
                let all = next("CL.THROTTLEALL", 6)?;
                let refused = all[0] != 0;
                for &i in idx {
                    let c = &charges[i];
                    let p = next("peek", 5)?;
                    let capacity = nonneg(p[1]);
                    let rem = nonneg(p[2]);
                    // Refused: nothing was written, and each descriptor is
                    // over if it could not take its hits alone; allowed:
                    // every key took them and the peek shows what is left.
                    let over = refused && c.hits > rem;
                    out[i] = Some(enforced_outcome(c, over, capacity, rem, nonneg(p[4])));
                }
            }
        }
    }
    out.into_iter()
        .enumerate()
        .map(|(i, o)| o.ok_or_else(|| BadReply(format!("no reply for descriptor {i}"))))
        .collect()
}

/// An outcome from a limiter that enforces its limit (a refusal writes
/// nothing): `remaining` is what is left after an allowed request, or
/// before a refused one.
fn enforced_outcome(
    c: &Charge,
    over: bool,
    capacity: u64,
    remaining: u64,
    reset_secs: u64,
) -> Outcome {
    let used = capacity.saturating_sub(remaining);
    let (before, after) = if over {
        (used, used.saturating_add(c.hits))
    } else {
        (used.saturating_sub(c.hits), used)
    };
    Outcome {
        index: c.index,
        over,
        before,
        after,
        remaining: if over { 0 } else { remaining },
        capacity,
        reset_secs: Some(reset_secs),
    }
}

#[cfg(test)]
mod tests;
