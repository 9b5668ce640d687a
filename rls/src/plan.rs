//! What one request sends to Redis, and what the replies mean: cache keys
//! with the reference's names, the redis-cell commands of each mode, and
//! the per-descriptor outcome read back from the replies. Pure.

use crate::config::{Algorithm, KeyValue, RateLimit};

/// The most hits one command takes (the module's quantities are at most
/// `i64::MAX`), and the limit under which a refund gives back hits of a
/// counting window whatever its count (`FW.REFUND` has no `COUNTALL`).
pub const COUNTING_LIMIT: i64 = 1 << 62;

/// The most limiters one `CL.THROTTLEALL` takes; a request with more is
/// charged in several calls, held together as calls of different hits are.
pub const MAX_LIMITERS: usize = 100;

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
pub fn cache_key<E: KeyValue>(
    prefix: &str,
    hash_tag: Option<&str>,
    domain: &str,
    entries: &[E],
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
        k.push_str(e.key());
        k.push('_');
        let shared = limit
            .share_threshold_pattern
            .as_ref()
            .and_then(|p| p.get(i))
            .filter(|p| !p.is_empty());
        k.push_str(shared.map(String::as_str).unwrap_or(e.value()));
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
    /// `is_negative_hits`: the hits are given back, not taken.
    pub negative: bool,
}

/// The largest quantity sent in a command: what the module's counting
/// limit holds (every limiter's quantity is at most `i64::MAX`).
fn quantity(hits: u64) -> String {
    hits.min(COUNTING_LIMIT as u64).to_string()
}

/// How a fixed window is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fw {
    /// The module enforces the limit: a refused hit writes nothing.
    Enforce,
    /// `COUNTALL` with the real limit (the reference mode): every hit is
    /// counted, refused or not, as the reference's `INCRBY` counts it, and
    /// the module's `INFO` and `CL.TOP` see the refused ones.
    CountAll,
    /// A refund of a counting window: the counting limit, under which the
    /// module takes back hits whatever the count (`FW.REFUND` has no
    /// `COUNTALL`).
    Refund,
}

/// The limiter words of a charge, as `CL.THROTTLEALL` and the single
/// commands take them after the key: the positional words, then the
/// options.
fn limiter_words(c: &Charge, fw: Fw) -> (&'static str, Vec<String>, Vec<String>) {
    let window = c.limit.window_seconds().to_string();
    let rpu = c.limit.requests_per_unit;
    match c.limit.algorithm {
        Algorithm::FixedWindow => {
            let limit = match fw {
                Fw::Refund => COUNTING_LIMIT.to_string(),
                _ => rpu.to_string(),
            };
            let mut opts = Vec::with_capacity(2);
            opts.push("ALIGN".to_string());
            if fw == Fw::CountAll {
                opts.push("COUNTALL".into());
            }
            ("FW", vec![limit, window], opts)
        }
        Algorithm::SlidingWindow => ("SW", vec![rpu.to_string(), window], Vec::new()),
        Algorithm::Gcra => (
            "GCRA",
            vec![c.limit.max_burst().to_string(), rpu.to_string(), window],
            Vec::new(),
        ),
    }
}

/// How the reference mode sends a fixed window (counting), and the other
/// modes every limiter.
fn fw_of(counting: bool) -> Fw {
    if counting {
        Fw::CountAll
    } else {
        Fw::Enforce
    }
}

/// `POLICY name` for a rule that names a policy: the module decides by
/// the policy while it exists, by the words before it otherwise.
fn push_policy(out: &mut Vec<String>, c: &Charge) {
    if let Some(p) = &c.limit.policy {
        out.push("POLICY".into());
        out.push(p.clone());
    }
}

/// A command with a quantity after the limiter's positional words.
fn with_quantity(cmd: &str, c: &Charge, fw: Fw, q: u64) -> Vec<String> {
    let (_, pos, opts) = limiter_words(c, fw);
    // Room for SHADOW and POLICY name too: the command never grows.
    let mut out = Vec::with_capacity(6 + pos.len() + opts.len());
    out.push(cmd.to_string());
    out.push(c.key.clone());
    out.extend(pos);
    out.push(quantity(q));
    out.extend(opts);
    out
}

fn single(c: &Charge, counting: bool, shadow: bool) -> Vec<String> {
    let cmd = match c.limit.algorithm {
        Algorithm::FixedWindow => "FW.INCR",
        Algorithm::SlidingWindow => "SW.ALLOW",
        Algorithm::Gcra => "CL.THROTTLE",
    };
    let mut out = with_quantity(cmd, c, fw_of(counting), c.hits);
    if shadow {
        out.push("SHADOW".into());
    }
    push_policy(&mut out, c);
    out
}

fn refund(c: &Charge, counting: bool, q: u64) -> Vec<String> {
    let cmd = match c.limit.algorithm {
        Algorithm::FixedWindow => "FW.REFUND",
        Algorithm::SlidingWindow => "SW.REFUND",
        Algorithm::Gcra => "CL.REFUND",
    };
    let fw = if counting { Fw::Refund } else { Fw::Enforce };
    with_quantity(cmd, c, fw, q)
}

/// A peek; with `policy`, of the limiter that decides (the policy's while
/// it exists), as the single commands are sent.
fn peek(c: &Charge, counting: bool, policy: bool) -> Vec<String> {
    let (kind, pos, opts) = limiter_words(c, fw_of(counting));
    let cmd = match kind {
        "FW" => "FW.PEEK",
        "SW" => "SW.PEEK",
        _ => "CL.PEEK",
    };
    let mut out = Vec::with_capacity(4 + pos.len() + opts.len());
    out.push(cmd.to_string());
    out.push(c.key.clone());
    out.extend(pos);
    out.extend(opts);
    if policy {
        push_policy(&mut out, c);
    }
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

/// Descriptors of one request that name the same key, charged as one
/// limiter with their hits summed (`CL.THROTTLEALL` names a key once).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    /// The charge whose limit applies (the smallest, if they differ).
    lead: usize,
    /// Every charge of the key, in request order.
    members: Vec<usize>,
    hits: u64,
}

#[derive(Clone, Debug, PartialEq)]
enum Step {
    /// Reference mode, fixed window: one counting `FW.INCR`.
    Count { charge: usize },
    /// One enforcing single command (reference mode, extended algorithm).
    Single { charge: usize },
    /// A shadow charge: a peek, then the command with `SHADOW`.
    Shadow { charge: usize },
    /// Hits the limiter can never take (more than it holds, or than the
    /// counting limit): over without asking, a peek for the numbers.
    Over { charge: usize, counting: bool },
    /// `is_negative_hits`: a refund, answered with the state after it.
    Refund { charge: usize, counting: bool },
    /// `CL.THROTTLEALL` over the enforced charges, then a peek of each;
    /// without `charged`, only the peeks (the request is refused).
    All { held: Vec<Held>, charged: bool },
    /// A refund of what an allowed `CL.THROTTLEALL` charged.
    Undo { held: Held },
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
    /// A refund (`is_negative_hits`): OK, counted in no stat.
    pub negative: bool,
}

/// Up to this many charges (or keys), a request's charges of one key are
/// found by a scan, without allocating; past it, by a map.
const SCAN: usize = 16;

/// All-or-nothing: the request's enforced charges, those naming one key
/// merged into one.
fn held(charges: &[Charge], enforced: &[usize]) -> Vec<Held> {
    let mut out: Vec<Held> = Vec::new();
    // By key: a request may hold hundreds of thousands of descriptors.
    let mut at: Option<std::collections::HashMap<&str, usize>> = None;
    for &i in enforced {
        let key = charges[i].key.as_str();
        let found = match &at {
            Some(at) => at.get(key).copied(),
            None => out.iter().position(|h| charges[h.lead].key == key),
        };
        match found.and_then(|k| out.get_mut(k)) {
            Some(h) => {
                h.members.push(i);
                h.hits = h.hits.saturating_add(charges[i].hits);
                if charges[i].limit.capacity() < charges[h.lead].limit.capacity() {
                    h.lead = i;
                }
            }
            None => {
                if at.is_none() && out.len() >= SCAN {
                    at = Some(
                        out.iter()
                            .enumerate()
                            .map(|(k, h)| (charges[h.lead].key.as_str(), k))
                            .collect(),
                    );
                }
                if let Some(at) = &mut at {
                    at.insert(key, out.len());
                }
                out.push(Held {
                    lead: i,
                    members: vec![i],
                    hits: charges[i].hits,
                });
            }
        }
    }
    out
}

fn enforced(charges: &[Charge], mode: Mode) -> Vec<usize> {
    if mode != Mode::AllOrNothing {
        return Vec::new();
    }
    (0..charges.len())
        .filter(|&i| !charges[i].negative && !charges[i].limit.shadow_mode)
        .collect()
}

/// Whether an all-or-nothing request must be refused before Redis: one of
/// its limiters is asked for more than it can ever hold.
pub fn never_fits(charges: &[Charge], mode: Mode) -> bool {
    if mode != Mode::AllOrNothing {
        return false;
    }
    if charges.len() <= SCAN {
        // As `held` merges them, without building it: each key once, at
        // its first enforced charge, its hits summed against the smallest
        // capacity among its charges.
        let counted = |i: usize| !charges[i].negative && !charges[i].limit.shadow_mode;
        let same = |i: usize, j: usize| counted(j) && charges[j].key == charges[i].key;
        return (0..charges.len()).filter(|&i| counted(i)).any(|i| {
            if (0..i).any(|j| same(i, j)) {
                return false;
            }
            let (mut hits, mut lead) = (0u64, i);
            for j in (i..charges.len()).filter(|&j| same(i, j)) {
                hits = hits.saturating_add(charges[j].hits);
                if charges[j].limit.capacity() < charges[lead].limit.capacity() {
                    lead = j;
                }
            }
            hits > charges[lead].limit.capacity()
        });
    }
    held(charges, &enforced(charges, mode))
        .iter()
        .any(|h| h.hits > charges[h.lead].limit.capacity())
}

/// The plan of a request's charges on one backend; in all-or-nothing mode
/// refused before Redis when [`never_fits`] says so.
pub fn plan(charges: &[Charge], mode: Mode) -> Plan {
    plan_with(charges, mode, never_fits(charges, mode))
}

/// [`plan`], with all-or-nothing refusal decided by the caller (who sees
/// the charges on every backend of the request).
pub fn plan_with(charges: &[Charge], mode: Mode, refused: bool) -> Plan {
    let mut commands = Vec::new();
    let mut steps = Vec::new();
    let mut ranges = Vec::new();
    let mut push = |cmds: Vec<Vec<String>>, step: Step, commands: &mut Vec<Vec<String>>| {
        ranges.push(commands.len()..commands.len() + cmds.len());
        commands.extend(cmds);
        steps.push(step);
    };
    for (i, c) in charges.iter().enumerate() {
        let counting = mode == Mode::Reference && c.limit.algorithm == Algorithm::FixedWindow;
        let fits = c.hits <= c.limit.capacity();
        if c.negative {
            push(
                vec![refund(c, counting, c.hits)],
                Step::Refund {
                    charge: i,
                    counting,
                },
                &mut commands,
            );
        } else if c.limit.shadow_mode && !counting {
            if fits {
                push(
                    vec![peek(c, false, true), single(c, false, true)],
                    Step::Shadow { charge: i },
                    &mut commands,
                );
            } else {
                push(
                    vec![peek(c, false, true)],
                    Step::Over {
                        charge: i,
                        counting: false,
                    },
                    &mut commands,
                );
            }
        } else if mode == Mode::AllOrNothing {
            // Below, all together.
        } else if counting && c.hits <= COUNTING_LIMIT as u64 {
            // A shadow rule's refusals are the module's `shadow_refused`
            // (the service answers OK all the same).
            push(
                vec![single(c, true, c.limit.shadow_mode)],
                Step::Count { charge: i },
                &mut commands,
            );
        } else if !counting && fits {
            push(
                vec![single(c, false, false)],
                Step::Single { charge: i },
                &mut commands,
            );
        } else {
            push(
                vec![peek(c, counting, true)],
                Step::Over {
                    charge: i,
                    counting,
                },
                &mut commands,
            );
        }
    }
    let all = held(charges, &enforced(charges, mode));
    if refused && !all.is_empty() {
        for h in &all {
            commands.push(peek(&charges[h.lead], false, false));
        }
        steps.push(Step::All {
            held: all,
            charged: false,
        });
    } else {
        // CL.THROTTLEALL takes one quantity: limiters with different hits
        // go in one call per quantity; the caller gives back what the
        // allowed calls took when another refuses ([`undo`]).
        let mut by_hits: Vec<(u64, Vec<Held>)> = Vec::new();
        for h in all {
            // The call of this quantity still taking limiters: its last
            // (a few calls a request: a scan, no map).
            match by_hits.iter_mut().rev().find(|(q, _)| *q == h.hits) {
                Some((_, g)) if g.len() < MAX_LIMITERS => g.push(h),
                _ => by_hits.push((h.hits, vec![h])),
            }
        }
        for (hits, group) in by_hits {
            // The words of each limiter (key, kind, up to three numbers,
            // ALIGN) and four more, without growing.
            let mut cmd = Vec::with_capacity(4 + 6 * group.len());
            cmd.push("CL.THROTTLEALL".to_string());
            cmd.push(group.len().to_string());
            for h in &group {
                cmd.push(charges[h.lead].key.clone());
            }
            for h in &group {
                let (kind, pos, opts) = limiter_words(&charges[h.lead], Fw::Enforce);
                cmd.push(kind.to_string());
                cmd.extend(pos);
                cmd.extend(opts);
            }
            cmd.push("QUANTITY".into());
            cmd.push(quantity(hits));
            commands.push(cmd);
            for h in &group {
                commands.push(peek(&charges[h.lead], false, false));
            }
            steps.push(Step::All {
                held: group,
                charged: true,
            });
        }
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

/// Gives back what allowed `CL.THROTTLEALL` calls of a refused request
/// took: one refund of each limiter, by the hits it was charged.
pub fn undo(charges: &[Charge], held: &[Held]) -> Plan {
    let mut commands = Vec::new();
    let mut steps = Vec::new();
    let mut groups = Vec::new();
    for h in held {
        groups.push(commands.len()..commands.len() + 1);
        commands.push(refund(&charges[h.lead], false, h.hits));
        steps.push(Step::Undo { held: h.clone() });
    }
    Plan {
        commands,
        atomic: true,
        all_or_nothing: true,
        groups,
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

/// What the replies of a plan say.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Interpreted {
    /// One per charge, in the charges' order.
    pub outcomes: Vec<Outcome>,
    /// Whether an all-or-nothing step refused the request.
    pub refused: bool,
    /// What allowed `CL.THROTTLEALL` calls took (to give back with [`undo`]
    /// when the request is refused elsewhere).
    pub charged: Vec<Held>,
}

/// The count of a counting fixed window from its reply: `limit -
/// remaining` (`remaining` is below 0 by the count over the limit).
fn counted(reply: &[i64]) -> u64 {
    let count = i128::from(reply[1]) - i128::from(reply[2]);
    u64::try_from(count.max(0)).unwrap_or(u64::MAX)
}

/// Reads the replies (one list of integers per command, in order).
pub fn interpret(
    plan: &Plan,
    charges: &[Charge],
    replies: &[Vec<i64>],
) -> Result<Interpreted, BadReply> {
    if replies.len() != plan.commands.len() {
        return Err(BadReply(format!(
            "{} replies for {} commands",
            replies.len(),
            plan.commands.len()
        )));
    }
    let mut out: Vec<Option<Outcome>> = vec![None; charges.len()];
    let mut refused = false;
    let mut charged = Vec::new();
    let mut r = replies.iter();
    let mut next = |what: &str, n: usize| -> Result<&Vec<i64>, BadReply> {
        let reply = r
            .next()
            .ok_or_else(|| BadReply(format!("missing reply to {what}")))?;
        ints(reply, n, what)?;
        Ok(reply)
    };
    let get = |i: usize| {
        charges
            .get(i)
            .ok_or_else(|| BadReply(format!("no descriptor {i}")))
    };
    for step in &plan.steps {
        match step {
            Step::Count { charge } => {
                let c = get(*charge)?;
                let reply = next("FW.INCR", 5)?;
                // The limit that decided: the configured one, or the
                // policy's while it exists.
                let limit = nonneg(reply[1]);
                let count = counted(reply);
                // The module counts up to 2^63 - 1 and refuses uncounted
                // the hits that would pass it: then the count is the one
                // before them (a count with them would be past 2^63 - 1).
                let (before, after) = if u128::from(count) + u128::from(c.hits) > i64::MAX as u128 {
                    (count, count.saturating_add(c.hits))
                } else {
                    (count.saturating_sub(c.hits), count)
                };
                // A policy decides with its own flags (a shadow policy
                // answers allowed); else over the limit is over, as the
                // reference compares (a shadow rule's SHADOW answers
                // allowed and the service flips the answer itself).
                let over = if c.limit.policy.is_some() && !c.limit.shadow_mode {
                    reply[0] != 0
                } else {
                    after > limit
                };
                out[*charge] = Some(Outcome {
                    index: c.index,
                    over,
                    before,
                    after,
                    remaining: limit.saturating_sub(after),
                    capacity: limit,
                    reset_secs: None,
                    negative: false,
                });
            }
            Step::Single { charge } => {
                let c = get(*charge)?;
                let reply = next("limiter", 5)?;
                out[*charge] = Some(enforced_outcome(
                    c,
                    reply[0] != 0,
                    nonneg(reply[1]),
                    nonneg(reply[2]),
                    nonneg(reply[4]),
                ));
            }
            Step::Over { charge, counting } => {
                let c = get(*charge)?;
                let p = next("peek", 5)?;
                out[*charge] = Some(if *counting {
                    let count = counted(p);
                    let limit = nonneg(p[1]);
                    Outcome {
                        index: c.index,
                        over: true,
                        before: count,
                        after: count.saturating_add(c.hits),
                        remaining: 0,
                        capacity: limit,
                        reset_secs: None,
                        negative: false,
                    }
                } else {
                    enforced_outcome(c, true, nonneg(p[1]), nonneg(p[2]), nonneg(p[4]))
                });
            }
            Step::Refund { charge, counting } => {
                let c = get(*charge)?;
                let p = next("refund", 5)?;
                let (capacity, used) = if *counting {
                    (u64::from(c.limit.requests_per_unit), counted(p))
                } else {
                    let capacity = nonneg(p[1]);
                    (capacity, capacity.saturating_sub(nonneg(p[2])))
                };
                out[*charge] = Some(Outcome {
                    index: c.index,
                    over: false,
                    before: used,
                    after: used,
                    remaining: capacity.saturating_sub(used),
                    capacity,
                    reset_secs: (!*counting).then(|| nonneg(p[4])),
                    negative: true,
                });
            }
            Step::Shadow { charge } => {
                let c = get(*charge)?;
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
            Step::All {
                held,
                charged: sent,
            } => {
                let (allowed, binding) = if *sent {
                    let all = next("CL.THROTTLEALL", 6)?;
                    // The refusing limiter's 1-based index.
                    let binding = usize::try_from(all[5]).ok().and_then(|b| b.checked_sub(1));
                    (all[0] == 0, binding)
                } else {
                    (false, None)
                };
                refused |= !allowed;
                for (k, h) in held.iter().enumerate() {
                    let p = next("peek", 5)?;
                    // Refused: nothing was written, and each limiter is
                    // over if it could not take its hits alone; allowed:
                    // every key took them and the peek shows what is left.
                    // The one that refused is over whatever its peek says:
                    // the module reads the clock per command, so a limiter
                    // refused by microseconds may fit at the peek after it.
                    let over = !allowed && (h.hits > nonneg(p[2]) || binding == Some(k));
                    for o in shared(charges, h, over, nonneg(p[1]), nonneg(p[2]), nonneg(p[4]))? {
                        let i = h.members[o.0];
                        out[i] = Some(o.1);
                    }
                }
                if allowed {
                    charged.extend(held.iter().cloned());
                }
            }
            Step::Undo { .. } => {
                return Err(BadReply("a refund step in a charging plan".into()));
            }
        }
    }
    let outcomes = out
        .into_iter()
        .enumerate()
        .map(|(i, o)| o.ok_or_else(|| BadReply(format!("no reply for descriptor {i}"))))
        .collect::<Result<_, _>>()?;
    Ok(Interpreted {
        outcomes,
        refused,
        charged,
    })
}

/// Reads the replies of an [`undo`] plan: the outcome of each descriptor
/// given back, as refused (over when its hits would not fit alone).
pub fn interpret_undo(
    plan: &Plan,
    charges: &[Charge],
    replies: &[Vec<i64>],
) -> Result<Vec<(usize, Outcome)>, BadReply> {
    if replies.len() != plan.commands.len() {
        return Err(BadReply(format!(
            "{} replies for {} refunds",
            replies.len(),
            plan.commands.len()
        )));
    }
    let mut out = Vec::new();
    for (step, p) in plan.steps.iter().zip(replies) {
        let Step::Undo { held: h } = step else {
            return Err(BadReply("a charging step in a refund plan".into()));
        };
        ints(p, 5, "refund")?;
        let over = h.hits > nonneg(p[2]);
        for (k, o) in shared(charges, h, over, nonneg(p[1]), nonneg(p[2]), nonneg(p[4]))? {
            out.push((h.members[k], o));
        }
    }
    Ok(out)
}

/// The outcomes of the descriptors of one limiter charged together: as if
/// each had been charged in turn (the stats see the counts pass by
/// each one's hits); all allowed, or all over, together.
fn shared(
    charges: &[Charge],
    h: &Held,
    over: bool,
    capacity: u64,
    remaining: u64,
    reset_secs: u64,
) -> Result<Vec<(usize, Outcome)>, BadReply> {
    let used = capacity.saturating_sub(remaining);
    let mut at = if over {
        used
    } else {
        used.saturating_sub(h.hits)
    };
    let mut out = Vec::with_capacity(h.members.len());
    for (k, &i) in h.members.iter().enumerate() {
        let c = charges
            .get(i)
            .ok_or_else(|| BadReply(format!("no descriptor {i}")))?;
        let before = at;
        at = at.saturating_add(c.hits);
        out.push((
            k,
            Outcome {
                index: c.index,
                over,
                before,
                after: at,
                remaining: if over { 0 } else { remaining },
                capacity,
                reset_secs: Some(reset_secs),
                negative: false,
            },
        ));
    }
    Ok(out)
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
        negative: false,
    }
}

#[cfg(test)]
mod tests;
