use super::*;
use crate::config::{RateLimit, Unit};

fn rl(rpu: u32) -> RateLimit {
    RateLimit::fixed_window("d.k".into(), rpu, Unit::Minute)
}

fn out(over: bool, before: u64, after: u64, cap: u64) -> Outcome {
    Outcome {
        index: 0,
        over,
        before,
        after,
        remaining: if over { 0 } else { cap - after },
        capacity: cap,
        reset_secs: None,
        negative: false,
    }
}

#[test]
fn hits_rules() {
    assert_eq!(hits(Some(0), 5), 0);
    assert_eq!(hits(None, 0), 1);
    assert_eq!(hits(None, 3), 3);
}

#[test]
fn stats_as_the_reference_counts_them() {
    // limit 10, near threshold 8: 7 -> 9 is within with one near hit
    let (s, d) = judge(&rl(10), &out(false, 7, 9, 10), 2, 0.8, 0);
    assert_eq!((s.code, s.limit_remaining), (Code::Ok, 1));
    assert_eq!((d.within_limit, d.near_limit, d.over_limit), (2, 1, 0));
    // 8 -> 13: 3 over, 2 near
    let (s, d) = judge(&rl(10), &out(true, 8, 13, 10), 5, 0.8, 0);
    assert_eq!(s.code, Code::OverLimit);
    assert_eq!((d.over_limit, d.near_limit, d.within_limit), (3, 2, 0));
    // already over: every hit is over
    let (_, d) = judge(&rl(10), &out(true, 12, 13, 10), 1, 0.8, 0);
    assert_eq!((d.over_limit, d.near_limit), (1, 0));
    assert_eq!(d.total_hits, 1);
    assert_eq!(reset_after(60, 130), 50);
}

#[test]
fn shadow_mode_answers_ok_and_counts() {
    let mut l = rl(10);
    l.shadow_mode = true;
    let (s, d) = judge(&l, &out(true, 10, 11, 10), 1, 0.8, 0);
    assert_eq!(s.code, Code::Ok);
    assert_eq!((d.shadow_mode, d.over_limit), (1, 1));
}

#[test]
fn replaces_and_unlimited() {
    let mut a = rl(1);
    a.name = "a".into();
    let mut b = rl(2);
    b.replaces = vec!["a".into()];
    let mut u = rl(0);
    u.unlimited = true;
    let checks = limits_to_check(vec![Some(a), Some(b.clone()), Some(u), None]);
    assert_eq!(checks[0], Check::NoLimit);
    assert_eq!(checks[1], Check::Limit(b));
    assert_eq!(checks[2], Check::Unlimited);
    assert_eq!(checks[3], Check::NoLimit);
}

fn status(code: Code, rem: u32) -> Status {
    Status {
        code,
        current_limit: Some((10, Unit::Minute, String::new())),
        limit_remaining: rem,
        duration_until_reset_secs: Some(1),
    }
}

#[test]
fn overall_code_and_quota_mode() {
    let mut q = rl(1);
    q.quota_mode = true;
    let quotas = vec![Check::Limit(q.clone()), Check::Limit(q.clone())];
    let o = overall(
        &quotas,
        &[status(Code::OverLimit, 0), status(Code::Ok, 3)],
        false,
        false,
    );
    assert_eq!(o.code, Code::Ok, "one quota over, not all of them");
    let checks = vec![Check::Limit(q.clone()), Check::Limit(rl(1))];
    let o = overall(
        &checks,
        &[status(Code::Ok, 5), status(Code::OverLimit, 0)],
        false,
        false,
    );
    assert_eq!((o.code, o.header_from), (Code::OverLimit, Some(1)));
    let o = overall(
        &[Check::Limit(q)],
        &[status(Code::OverLimit, 0)],
        false,
        false,
    );
    assert_eq!(o.code, Code::OverLimit, "every quota descriptor over");
    let o = overall(&checks[1..], &[status(Code::OverLimit, 0)], false, true);
    assert!(o.code == Code::Ok && o.global_shadow_hit);
    let o = overall(
        &checks,
        &[status(Code::Ok, 5), status(Code::Ok, 2)],
        false,
        false,
    );
    assert_eq!(
        o.header_from,
        Some(1),
        "the descriptor closest to its limit"
    );
}

#[test]
fn a_refund_is_ok_and_counted_in_no_stat() {
    let refund = Outcome {
        negative: true,
        ..out(false, 1, 1, 5)
    };
    let checks = [Check::Limit(rl(5))];
    let (statuses, deltas) = super::statuses(&checks, &[u64::MAX], &[refund], 0.8, 30);
    assert_eq!(statuses[0].code, Code::Ok);
    assert_eq!(statuses[0].limit_remaining, 4);
    assert_eq!(statuses[0].duration_until_reset_secs, Some(30));
    assert!(deltas.is_empty());
}

#[test]
fn hits_past_any_count_judge_without_overflow() {
    let o = Outcome {
        remaining: 0,
        ..out(true, 3, u64::MAX, 5)
    };
    let (s, d) = judge(&rl(5), &o, u64::MAX, 0.8, 0);
    assert_eq!(s.code, Code::OverLimit);
    assert_eq!(s.limit_remaining, 0);
    assert_eq!(d.total_hits, u64::MAX);
    assert_eq!(d.over_limit, u64::MAX - 5);
    assert_eq!(d.near_limit, 5 - 4);
}

#[test]
fn many_descriptors_are_decided_in_linear_time() {
    // Each outcome is found by its index, not by a search of all of them.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let l = rl(5);
        let n = 200_000;
        let checks: Vec<Check> = (0..n).map(|_| Check::Limit(l.clone())).collect();
        let hits = vec![1u64; n];
        let outcomes: Vec<Outcome> = (0..n)
            .rev()
            .map(|i| Outcome {
                index: i,
                over: false,
                before: 0,
                after: 1,
                remaining: 4,
                capacity: 5,
                reset_secs: None,
                negative: false,
            })
            .collect();
        let (s, d) = statuses(&checks, &hits, &outcomes, 0.8, 0);
        let _ = tx.send((s.len(), d.len()));
    });
    let got = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("decided within 60 s");
    assert_eq!(got, (200_000, 200_000));
}

#[test]
fn a_policy_limit_is_the_threshold_and_the_current_limit() {
    // The rule says 10 a minute; its policy holds 20 now (the module's
    // reply): 15 is within, 17 near (threshold 16), and the status shows 20.
    let mut l = rl(10);
    l.policy = Some("p".into());
    let (s, d) = judge(&l, &out(false, 14, 15, 20), 1, 0.8, 0);
    assert_eq!((s.code, s.limit_remaining), (Code::Ok, 5));
    assert_eq!(s.current_limit, Some((20, Unit::Minute, String::new())));
    assert_eq!((d.within_limit, d.near_limit, d.over_limit), (1, 0, 0));
    let (_, d) = judge(&l, &out(false, 16, 17, 20), 1, 0.8, 0);
    assert_eq!(d.near_limit, 1);
    // Lowered to 5: 6 is over by 1, with the near hits below it.
    let (s, d) = judge(&l, &out(true, 3, 6, 5), 3, 0.8, 0);
    assert_eq!(s.code, Code::OverLimit);
    assert_eq!(s.current_limit.map(|c| c.0), Some(5));
    assert_eq!((d.over_limit, d.near_limit), (1, 1));
}

#[test]
fn a_cached_refusal_counts_as_the_references() {
    // 40 s into a minute's window: 20 s to its end.
    let (s, d) = judge_cached(&rl(10), 3, 1_700_000_020);
    assert_eq!((s.code, s.limit_remaining), (Code::OverLimit, 0));
    assert_eq!(s.current_limit, Some((10, Unit::Minute, String::new())));
    assert_eq!(s.duration_until_reset_secs, Some(20));
    assert_eq!(
        d,
        StatDelta {
            total_hits: 3,
            over_limit: 3,
            over_limit_with_local_cache: 3,
            ..StatDelta::default()
        }
    );
}
