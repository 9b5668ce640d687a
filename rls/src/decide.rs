//! The service's decisions, as the reference makes them: which limits a
//! request checks (`unlimited`, `replaces`), the hits of each descriptor,
//! each descriptor's status and stats from its counts, the overall code
//! (quota mode, global shadow mode) and the `RateLimit-*` headers. Pure.

use crate::config::{Algorithm, RateLimit, Unit};
use crate::plan::Outcome;

/// A descriptor's code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    Ok,
    OverLimit,
}

/// One descriptor's status in the response.
#[derive(Clone, Debug, PartialEq)]
pub struct Status {
    pub code: Code,
    /// `(requests_per_unit, unit, name)` of the limit that applied.
    pub current_limit: Option<(u32, Unit, String)>,
    pub limit_remaining: u32,
    pub duration_until_reset_secs: Option<u64>,
}

impl Status {
    fn unlimited() -> Status {
        Status {
            code: Code::Ok,
            current_limit: None,
            limit_remaining: u32::MAX,
            duration_until_reset_secs: None,
        }
    }

    fn no_limit() -> Status {
        Status {
            code: Code::Ok,
            current_limit: None,
            limit_remaining: 0,
            duration_until_reset_secs: None,
        }
    }
}

/// What a descriptor checks, once `unlimited` and `replaces` are applied.
#[derive(Clone, Debug, PartialEq)]
pub enum Check {
    /// No rule matched: OK without a limit.
    NoLimit,
    Unlimited,
    Limit(RateLimit),
}

/// The reference's rules: an unlimited rule checks nothing; a rule whose
/// `name` another matched rule `replaces` is dropped.
pub fn limits_to_check(matched: Vec<Option<RateLimit>>) -> Vec<Check> {
    let replacing: std::collections::HashSet<String> = matched
        .iter()
        .flatten()
        .flat_map(|l| l.replaces.iter().cloned())
        .collect();
    matched
        .into_iter()
        .map(|m| match m {
            None => Check::NoLimit,
            Some(l) if l.unlimited => Check::Unlimited,
            Some(l) if !l.name.is_empty() && replacing.contains(&l.name) => Check::NoLimit,
            Some(l) => Check::Limit(l),
        })
        .collect()
}

/// A descriptor's hits: its own `hits_addend` (0 allowed), else the
/// request's, at least 1.
pub fn hits(descriptor_hits: Option<u64>, request_hits: u32) -> u64 {
    descriptor_hits.unwrap_or_else(|| u64::from(request_hits.max(1)))
}

/// Increments of one limit's stats (named as the reference's counters).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatDelta {
    pub total_hits: u64,
    pub over_limit: u64,
    pub near_limit: u64,
    pub within_limit: u64,
    pub shadow_mode: u64,
    /// Hits answered from the local over-limit cache (also in
    /// `over_limit`, as the reference counts them).
    pub over_limit_with_local_cache: u64,
}

/// Seconds until the current window of `window` seconds ends.
pub fn reset_after(window: u64, now_secs: u64) -> u64 {
    if window == 0 {
        return 0;
    }
    window - now_secs % window
}

/// The near-limit threshold, computed as the reference does (a float32
/// product, floored).
pub fn near_threshold(limit: u64, ratio: f32) -> u64 {
    let t = (limit as f32 * ratio) as f64;
    t.floor().max(0.0) as u64
}

/// One limited descriptor's status and stats from its outcome.
pub fn judge(
    limit: &RateLimit,
    outcome: &Outcome,
    hits: u64,
    near_ratio: f32,
    now_secs: u64,
) -> (Status, StatDelta) {
    // The reference's threshold is the configured limit; a GCRA limiter's
    // capacity includes its burst; a policy's limit is the module's.
    let threshold = if limit.is_extended() || limit.policy.is_some() {
        outcome.capacity
    } else {
        u64::from(limit.requests_per_unit)
    };
    let near = near_threshold(threshold, near_ratio);
    let (before, after) = (outcome.before, outcome.after);
    let mut d = StatDelta {
        total_hits: hits,
        ..StatDelta::default()
    };
    let code = if outcome.over {
        if before >= threshold {
            d.over_limit = hits;
        } else {
            d.over_limit = after.saturating_sub(threshold);
            d.near_limit = threshold.saturating_sub(near.max(before));
        }
        if limit.shadow_mode {
            d.shadow_mode = if before >= threshold {
                hits
            } else {
                after.saturating_sub(threshold)
            };
            Code::Ok
        } else {
            Code::OverLimit
        }
    } else {
        if after > near {
            d.near_limit = if before >= near { hits } else { after - near };
        }
        d.within_limit = hits;
        Code::Ok
    };
    let remaining = if outcome.over { 0 } else { outcome.remaining };
    (limited_status(limit, outcome, code, remaining, now_secs), d)
}

fn limited_status(
    limit: &RateLimit,
    outcome: &Outcome,
    code: Code,
    remaining: u64,
    now_secs: u64,
) -> Status {
    let unit = limit.unit.unwrap_or(Unit::Second);
    // A fixed window's policy: the limit it holds now (the module's reply).
    let requests_per_unit = if limit.policy.is_some() && !limit.is_extended() {
        u32::try_from(outcome.capacity).unwrap_or(u32::MAX)
    } else {
        limit.requests_per_unit
    };
    Status {
        code,
        current_limit: Some((requests_per_unit, unit, limit.name.clone())),
        limit_remaining: u32::try_from(remaining).unwrap_or(u32::MAX),
        duration_until_reset_secs: Some(match (limit.algorithm, outcome.reset_secs) {
            (Algorithm::FixedWindow, _) | (_, None) => {
                reset_after(limit.window_seconds(), now_secs)
            }
            (_, Some(r)) => r,
        }),
    }
}

/// A descriptor the local over-limit cache answers: OVER_LIMIT without
/// asking Redis, its hits counted in `total_hits`, `over_limit` and
/// `over_limit_with_local_cache`, as the reference counts them.
pub fn judge_cached(limit: &RateLimit, hits: u64, now_secs: u64) -> (Status, StatDelta) {
    let outcome = Outcome {
        index: 0,
        over: true,
        before: 0,
        after: 0,
        remaining: 0,
        capacity: u64::from(limit.requests_per_unit),
        reset_secs: None,
        negative: false,
    };
    let d = StatDelta {
        total_hits: hits,
        over_limit: hits,
        over_limit_with_local_cache: hits,
        ..StatDelta::default()
    };
    (
        limited_status(limit, &outcome, Code::OverLimit, 0, now_secs),
        d,
    )
}

/// A descriptor with `is_negative_hits`: its hits were given back. OK,
/// with what is left after the refund; none of the limit's stats counts
/// it (they count requests that take hits).
pub fn judge_refund(limit: &RateLimit, outcome: &Outcome, now_secs: u64) -> Status {
    limited_status(limit, outcome, Code::Ok, outcome.remaining, now_secs)
}

/// The statuses of a request whose descriptors are `checks`, given the
/// outcome of each limited one (by index), and the stats each limited
/// descriptor adds (by its index in `checks`: its limit names the key).
pub fn statuses(
    checks: &[Check],
    hits: &[u64],
    outcomes: &[Outcome],
    near_ratio: f32,
    now_secs: u64,
) -> (Vec<Status>, Vec<(usize, StatDelta)>) {
    let mut statuses = Vec::with_capacity(checks.len());
    let mut deltas = Vec::with_capacity(checks.len());
    // By index: a request may hold hundreds of thousands of descriptors.
    let mut by_index: Vec<Option<&Outcome>> = vec![None; checks.len()];
    for o in outcomes {
        if let Some(slot) = by_index.get_mut(o.index) {
            slot.get_or_insert(o);
        }
    }
    for (i, check) in checks.iter().enumerate() {
        match check {
            Check::NoLimit => statuses.push(Status::no_limit()),
            Check::Unlimited => statuses.push(Status::unlimited()),
            Check::Limit(l) => match by_index[i] {
                Some(o) if o.negative => statuses.push(judge_refund(l, o, now_secs)),
                Some(o) => {
                    let (s, d) = judge(l, o, hits[i], near_ratio, now_secs);
                    statuses.push(s);
                    deltas.push((i, d));
                }
                None => statuses.push(Status::no_limit()),
            },
        }
    }
    (statuses, deltas)
}

/// The overall code and the descriptor whose numbers go into the
/// `RateLimit-*` headers, with the reference's rules: OVER_LIMIT when a
/// descriptor that is not in quota mode is over, or when every quota
/// descriptor is; global shadow mode turns it into OK (and says so).
pub struct Overall {
    pub code: Code,
    pub header_from: Option<usize>,
    pub global_shadow_hit: bool,
}

pub fn overall(
    checks: &[Check],
    statuses: &[Status],
    global_quota_mode: bool,
    global_shadow_mode: bool,
) -> Overall {
    let mut min_remaining = u32::MAX;
    let mut header_from = None;
    let (mut failed_rate, mut failed_quota, mut total_quota) = (0, 0, 0);
    for (i, (check, s)) in checks.iter().zip(statuses).enumerate() {
        if s.current_limit.is_some() && s.limit_remaining < min_remaining {
            header_from = Some(i);
            min_remaining = s.limit_remaining;
        }
        if matches!(check, Check::Unlimited) {
            continue;
        }
        let quota = global_quota_mode || matches!(check, Check::Limit(l) if l.quota_mode);
        if s.code == Code::OverLimit {
            if quota {
                failed_quota += 1;
            } else {
                failed_rate += 1;
                header_from = Some(i);
                min_remaining = 0;
            }
        }
        if quota {
            total_quota += 1;
        }
    }
    let mut code = if failed_rate > 0 || (total_quota > 0 && total_quota == failed_quota) {
        Code::OverLimit
    } else {
        Code::Ok
    };
    let mut global_shadow_hit = false;
    if code == Code::OverLimit && global_shadow_mode {
        code = Code::Ok;
        global_shadow_hit = true;
    }
    Overall {
        code,
        header_from,
        global_shadow_hit,
    }
}

#[cfg(test)]
mod tests;
