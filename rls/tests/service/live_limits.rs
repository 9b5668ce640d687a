//! The reference mode on the module's counting fixed window (`COUNTALL`):
//! the counters stay the reference's (every hit counted, as `INCRBY`), and
//! the module sees the refusals (`INFO`, `CL.TOP`); a rule that names a
//! `CL.POLICY` changes its limit live, trials and promotes it.

use crate::support::*;
use envoy_types::pb::google::protobuf::UInt64Value;
use testkit::Reply;

/// One `redis-cell` INFO field (`fw_incr_limited`, ...).
fn info(redis: &Redis, field: &str) -> i64 {
    let info = testkit::call(redis.port, &["INFO", "redis-cell"]).expect("INFO");
    testkit::resp::field(&info, &format!("redis-cell_{field}"))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in {}", info.text()))
}

/// `CL.TOP ...` as (key, count) pairs.
fn top(redis: &Redis, args: &[&str]) -> Vec<(String, i64)> {
    let mut cmd = vec!["CL.TOP", "COUNT", "100"];
    cmd.extend_from_slice(args);
    let r = testkit::call(redis.port, &cmd).expect("CL.TOP");
    assert!(!matches!(r, Reply::Error(_)), "{cmd:?}: {r:?}");
    r.items()
        .iter()
        .map(|e| match e.items() {
            [k, Reply::Int(n), ..] => (k.text(), *n),
            other => panic!("CL.TOP entry {other:?}"),
        })
        .collect()
}

fn count_in_top(redis: &Redis, args: &[&str], key: &str) -> Option<i64> {
    top(redis, args)
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, n)| n)
}

/// A key's TTL in seconds.
fn ttl(redis: &Redis, key: &str) -> i64 {
    match testkit::call(redis.port, &["TTL", key]).expect("TTL") {
        Reply::Int(n) => n,
        other => panic!("TTL {key}: {other:?}"),
    }
}

fn ok(redis: &Redis, args: &[&str]) {
    let r = testkit::call(redis.port, args).expect("command");
    assert_eq!(r, Reply::Status("OK".into()), "{args:?}");
}

const COUNTED: &str = r#"
domain: cnt
descriptors:
  - key: user
    rate_limit:
      unit: hour
      requests_per_unit: 10
  - key: path
    rate_limit:
      unit: hour
      requests_per_unit: 2
  - key: trial
    shadow_mode: true
    rate_limit:
      unit: hour
      requests_per_unit: 1
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_reach_info_and_top_with_the_references_counters() {
    not_near_hour_end();
    let redis = Redis::start();
    let rls = Rls::start(&redis.url(), &[("cnt.yaml", COUNTED)], &[]);
    let mut c = rls.client().await;
    let u = unique("u");
    let key = format!("cnt_user_{u}_{}", hour());
    // What the reference leaves for the same hits: INCRBY each, the
    // expiry at the window's end set by the first (the module's ALIGN).
    let twin = format!("{key}-incrby");
    let (limited, calls) = (
        info(&redis, "fw_incr_limited"),
        info(&redis, "fw_incr_calls"),
    );

    let mut got = Vec::new();
    for i in 0..15 {
        let r = call(&mut c, request("cnt", vec![desc(&[("user", &u)])])).await;
        got.push((r.overall_code, r.statuses[0].limit_remaining));
        redis.cmd(&["INCRBY", &twin, "1"]);
        if i == 0 {
            redis.cmd(&["EXPIREAT", &twin, &(hour() + 3600).to_string()]);
        }
    }
    let mut want: Vec<(i32, u32)> = (0..10).map(|i| (OK, 9 - i)).collect();
    want.extend([(OVER, 0); 5]);
    assert_eq!(got, want);

    // The module saw 15 calls and refused 5, and names the key with 5.
    assert_eq!(info(&redis, "fw_incr_calls") - calls, 15);
    assert_eq!(info(&redis, "fw_incr_limited") - limited, 5);
    assert_eq!(
        count_in_top(&redis, &[], &key),
        Some(5),
        "{:?}",
        top(&redis, &[])
    );

    // The counter is the reference's: every hit counted, an integer
    // string expiring with its window, as the INCRBY twin.
    assert_eq!(redis.get_int(&key), 15);
    assert_eq!(redis.get_int(&key), redis.get_int(&twin));
    let (t, tt) = (ttl(&redis, &key), ttl(&redis, &twin));
    assert!(t > 0 && t <= 3600 && (t - tt).abs() <= 1, "{t} {tt}");

    // The stats the service exports are the reference's.
    let m = |s: &str| {
        rls.metric(&format!(
            "ratelimit_service_rate_limit_{s}{{domain=\"cnt\",key1=\"user\"}}"
        ))
    };
    assert_eq!(
        (
            m("total_hits"),
            m("over_limit"),
            m("near_limit"),
            m("within_limit")
        ),
        (15, 5, 2, 10)
    );

    // hits_addend: a descriptor's own, then the request's, counted whole.
    let v = unique("v");
    let vkey = format!("cnt_user_{v}_{}", hour());
    let mut d = desc(&[("user", &v)]);
    d.hits_addend = Some(UInt64Value { value: 7 });
    let r = call(&mut c, request("cnt", vec![d])).await;
    assert_eq!((r.overall_code, r.statuses[0].limit_remaining), (OK, 3));
    let mut req = request("cnt", vec![desc(&[("user", &v)])]);
    req.hits_addend = 5;
    let r = call(&mut c, req).await;
    assert_eq!((r.overall_code, r.statuses[0].limit_remaining), (OVER, 0));
    assert_eq!(redis.get_int(&vkey), 12);
    // 0 only looks.
    let mut d = desc(&[("user", &v)]);
    d.hits_addend = Some(UInt64Value { value: 0 });
    let r = call(&mut c, request("cnt", vec![d])).await;
    assert_eq!(r.overall_code, OVER);
    assert_eq!(redis.get_int(&vkey), 12);

    // Several descriptors: each its own counter, each counting even when
    // another refuses the request.
    let w = unique("w");
    for _ in 0..3 {
        call(
            &mut c,
            request("cnt", vec![desc(&[("user", &w)]), desc(&[("path", &w)])]),
        )
        .await;
    }
    assert_eq!(redis.get_int(&format!("cnt_user_{w}_{}", hour())), 3);
    assert_eq!(redis.get_int(&format!("cnt_path_{w}_{}", hour())), 3);
    assert_eq!(
        count_in_top(&redis, &[], &format!("cnt_path_{w}_{}", hour())),
        Some(1)
    );

    // A shadow rule: answered OK, counted as the reference counts, and
    // the module's refusals are shadow ones.
    let (limited, shadow) = (
        info(&redis, "fw_incr_limited"),
        info(&redis, "fw_incr_shadow_refused"),
    );
    for _ in 0..3 {
        let r = call(&mut c, request("cnt", vec![desc(&[("trial", &w)])])).await;
        assert_eq!(r.overall_code, OK);
    }
    assert_eq!(redis.get_int(&format!("cnt_trial_{w}_{}", hour())), 3);
    assert_eq!(info(&redis, "fw_incr_shadow_refused") - shadow, 2);
    assert_eq!(info(&redis, "fw_incr_limited"), limited);
    assert_eq!(
        rls.metric("ratelimit_service_rate_limit_shadow_mode{domain=\"cnt\",key1=\"trial\"}"),
        2
    );
}

const LIVE: &str = r#"
domain: live
descriptors:
  - key: user
    rate_limit:
      unit: hour
      requests_per_unit: 3
      policy: live-user
"#;

/// The answers to four requests of `user` at the rule's own limit of 3.
const THE_RULES_THREE: [(i32, u32, Option<u32>); 4] = [
    (OK, 2, Some(3)),
    (OK, 1, Some(3)),
    (OK, 0, Some(3)),
    (OVER, 0, Some(3)),
];

/// Four requests of `user`, one after another.
async fn four(c: &mut Client, user: &str) -> [(i32, u32, Option<u32>); 4] {
    let mut got = [(0, 0, None); 4];
    for g in &mut got {
        *g = one(c, user).await;
    }
    got
}

/// The overall code, remaining and limit of one request of `user`.
async fn one(c: &mut Client, user: &str) -> (i32, u32, Option<u32>) {
    let r = call(c, request("live", vec![desc(&[("user", user)])])).await;
    (r.overall_code, r.statuses[0].limit_remaining, limit_of(&r))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_changes_trials_and_promotes_a_limit_live() {
    not_near_hour_end();
    let redis = Redis::start();
    let rls = Rls::start(&redis.url(), &[("live.yaml", LIVE)], &[]);
    let mut c = rls.client().await;
    let u = unique("u");
    let key = format!("live_user_{u}_{}", hour());

    // No such policy yet: the rule's own limit, 3.
    assert_eq!(four(&mut c, &u).await, THE_RULES_THREE);

    // Raised live: the next request is decided by the policy, on the same
    // counter (4 so far).
    ok(
        &redis,
        &["CL.POLICY", "SET", "live-user", "FW", "6", "3600", "ALIGN"],
    );
    assert_eq!(one(&mut c, &u).await, (OK, 1, Some(6)));
    assert_eq!(one(&mut c, &u).await, (OK, 0, Some(6)));
    assert_eq!(one(&mut c, &u).await, (OVER, 0, Some(6)));
    assert_eq!(redis.get_int(&key), 7);
    assert_eq!(
        count_in_top(&redis, &["POLICY", "live-user"], &key),
        Some(1)
    );

    // A stricter limit on trial: nobody is refused by it, CL.TOP ... TRIAL
    // shows whom it would refuse.
    ok(
        &redis,
        &[
            "CL.POLICY",
            "SET",
            "live-user",
            "FW",
            "6",
            "3600",
            "ALIGN",
            "TRIAL",
            "FW",
            "2",
            "3600",
            "ALIGN",
        ],
    );
    let v = unique("v");
    let vkey = format!("live_user_{v}_{}", hour());
    let mut got = Vec::new();
    for _ in 0..4 {
        got.push(one(&mut c, &v).await.0);
    }
    assert_eq!(got, vec![OK, OK, OK, OK]);
    assert_eq!(
        count_in_top(&redis, &["POLICY", "live-user", "TRIAL"], &vkey),
        Some(2),
        "{:?}",
        top(&redis, &["POLICY", "live-user", "TRIAL"])
    );
    assert_eq!(count_in_top(&redis, &["POLICY", "live-user"], &vkey), None);

    // Promoted: the trial's limit (2) is enforced from the next request.
    ok(&redis, &["CL.POLICY", "PROMOTE", "live-user"]);
    assert_eq!(one(&mut c, &v).await, (OVER, 0, Some(2)));
    let x = unique("x");
    assert_eq!(one(&mut c, &x).await, (OK, 1, Some(2)));
    assert_eq!(one(&mut c, &x).await, (OK, 0, Some(2)));
    assert_eq!(one(&mut c, &x).await, (OVER, 0, Some(2)));

    // Deleted: the rule's own limit again.
    let r = testkit::call(redis.port, &["CL.POLICY", "DEL", "live-user"]).unwrap();
    assert_eq!(r, Reply::Int(1));
    assert_eq!(one(&mut c, &x).await, (OVER, 0, Some(3)));
    let y = unique("y");
    assert_eq!(one(&mut c, &y).await, (OK, 2, Some(3)));
}

/// In all-or-nothing mode the rules' numbers decide (one `CL.THROTTLEALL`
/// has no fallback for a missing policy): the log says so, and a policy
/// changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_or_nothing_mode_says_the_policies_do_not_apply() {
    not_near_hour_end();
    let redis = Redis::start();
    let rls = Rls::start(
        &redis.url(),
        &[("live.yaml", LIVE)],
        &[("ALL_OR_NOTHING", "true")],
    );
    assert!(
        rls.log_text().contains(
            "rules name policies (live-user): in all-or-nothing mode their own numbers decide (CL.THROTTLEALL), except shadow rules"
        ),
        "{}",
        rls.log_text()
    );
    ok(
        &redis,
        &["CL.POLICY", "SET", "live-user", "FW", "6", "3600", "ALIGN"],
    );
    let mut c = rls.client().await;
    let u = unique("u");
    assert_eq!(four(&mut c, &u).await, THE_RULES_THREE);
}
