//! Values a client or an operator can send that the module cannot take:
//! huge hits, the same descriptor twice, all-or-nothing across the
//! per-second Redis, rules past the module's bounds, `is_negative_hits`.
//! Against the built service and a real server with the module.

use crate::support::*;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::UInt64Value;

fn with_hits(mut d: RateLimitDescriptor, hits: u64) -> RateLimitDescriptor {
    d.hits_addend = Some(UInt64Value { value: hits });
    d
}

fn negative(d: RateLimitDescriptor, hits: u64) -> RateLimitDescriptor {
    RateLimitDescriptor {
        is_negative_hits: true,
        ..with_hits(d, hits)
    }
}

/// Past the module's counting limit (2^62) and up to 2^64 - 1.
const HUGE: [u64; 4] = [(1 << 62) + 1, (1 << 63) - 1, 1 << 63, u64::MAX];

fn rules(keys: &[&str], rule: &str) -> String {
    let mut y = String::from("domain: h\ndescriptors:\n");
    for k in keys {
        y.push_str(&format!("  - key: {k}\n    rate_limit: {rule}\n"));
    }
    y
}

/// Each huge value on its own rule, beside a small descriptor that must be
/// decided as if alone; then a look (hits 0) shows that nothing was taken.
async fn huge_hits_on(rule: &str, env: &[(&str, &str)], hits: &[u64]) {
    let redis = Redis::start();
    let keys = ["a", "b", "c", "d", "e", "small"];
    let rls = Rls::start(&redis.url(), &[("h.yaml", &rules(&keys, rule))], env);
    let mut c = rls.client().await;
    let u = unique("u");
    for (k, &hits) in keys.iter().zip(hits) {
        let r = call(
            &mut c,
            request(
                "h",
                vec![with_hits(desc(&[(k, &u)]), hits), desc(&[("small", &u)])],
            ),
        )
        .await;
        assert_eq!(codes(&r)[0], OVER, "{rule} {env:?} {k} hits {hits}: {r:?}");
        assert_eq!(remaining(&r)[0], 0, "{hits}");
        // The other descriptor is unspoiled.
        assert_eq!(codes(&r)[1], OK, "{rule} {env:?} {hits}: {r:?}");
        let r = call(&mut c, request("h", vec![with_hits(desc(&[(k, &u)]), 0)])).await;
        assert_eq!(
            (codes(&r), remaining(&r)),
            (vec![OK], vec![5]),
            "{rule} {env:?} {k} after {hits}"
        );
    }
    assert_eq!(
        rls.metric("ratelimit_service_should_rate_limit_error{err_type=\"redis_error\"}"),
        0
    );
    assert!(
        rls.metric("ratelimit_service_rate_limit_over_limit{domain=\"h\",key1=\"a\"}") > 0,
        "{}",
        rls.metrics()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_hits_are_over_the_limit_in_the_default_mode() {
    not_near_hour_end();
    huge_hits_on("{unit: hour, requests_per_unit: 5}", &[], &HUGE).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_hits_are_over_the_limit_with_the_extended_algorithms() {
    let mut hits = HUGE.to_vec();
    hits.push(1 << 32);
    for rule in [
        "{unit: hour, requests_per_unit: 5, algorithm: gcra}",
        "{unit: minute, requests_per_unit: 5, algorithm: gcra}",
        "{unit: hour, requests_per_unit: 5, algorithm: sliding_window}",
    ] {
        huge_hits_on(rule, &[], &hits).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_hits_are_over_the_limit_in_all_or_nothing_mode() {
    not_near_hour_end();
    let mut hits = HUGE.to_vec();
    hits.push(1 << 32);
    for rule in [
        "{unit: hour, requests_per_unit: 5}",
        "{unit: minute, requests_per_unit: 5, algorithm: gcra}",
        "{unit: hour, requests_per_unit: 5, algorithm: sliding_window}",
    ] {
        // All-or-nothing refuses the whole request; the small descriptor
        // is OK by itself, as a refused request's statuses say.
        huge_hits_on(rule, &[("ALL_OR_NOTHING", "true")], &hits).await;
    }
}

/// In the default mode a request's hits up to the counting limit (2^62)
/// are counted, as the reference's INCRBY counts them, until the counter
/// would pass 2^63 - 1; more hits are over and not counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_hits_count_up_to_the_counting_limit() {
    not_near_hour_end();
    let redis = Redis::start();
    let rls = Rls::start(
        &redis.url(),
        &[(
            "h.yaml",
            &rules(&["a"], "{unit: hour, requests_per_unit: 5}"),
        )],
        &[],
    );
    let mut c = rls.client().await;
    let u = unique("u");
    let key = format!("h_a_{u}_{}", hour());
    let r = call(&mut c, request("h", vec![with_hits(desc(&[("a", &u)]), 1)])).await;
    assert_eq!(codes(&r), vec![OK]);
    let r = call(
        &mut c,
        request("h", vec![with_hits(desc(&[("a", &u)]), (1 << 62) + 1)]),
    )
    .await;
    assert_eq!(codes(&r), vec![OVER]);
    assert_eq!(redis.get_int(&key), 1);
    let r = call(
        &mut c,
        request("h", vec![with_hits(desc(&[("a", &u)]), (1 << 62) - 1)]),
    )
    .await;
    assert_eq!(codes(&r), vec![OVER]);
    assert_eq!(redis.get_int(&key), 1 << 62);
    // The counter goes on as INCRBY's, up to 2^63 - 1; hits that would
    // take it past are over and not counted (INCRBY's overflow error).
    let r = call(&mut c, request("h", vec![with_hits(desc(&[("a", &u)]), 1)])).await;
    assert_eq!((codes(&r), remaining(&r)), (vec![OVER], vec![0]));
    assert_eq!(redis.get_int(&key), (1 << 62) + 1);
    let r = call(
        &mut c,
        request("h", vec![with_hits(desc(&[("a", &u)]), 1 << 62)]),
    )
    .await;
    assert_eq!((codes(&r), remaining(&r)), (vec![OVER], vec![0]));
    assert_eq!(redis.get_int(&key), (1 << 62) + 1);
    let r = call(
        &mut c,
        request("h", vec![with_hits(desc(&[("a", &u)]), (1 << 62) - 2)]),
    )
    .await;
    assert_eq!(codes(&r), vec![OVER]);
    assert_eq!(redis.get_int(&key), i64::MAX);
    // The counter is full: any further hit is over, not a count of 0.
    let r = call(&mut c, request("h", vec![with_hits(desc(&[("a", &u)]), 1)])).await;
    assert_eq!((codes(&r), remaining(&r)), (vec![OVER], vec![0]));
    assert_eq!(redis.get_int(&key), i64::MAX);
}

fn start_per_second(main: &Redis, fast: &Redis, file: &str, cfg: &str) -> Rls {
    let fast_url = fast.url();
    let env = [
        ("ALL_OR_NOTHING", "true"),
        ("REDIS_PERSECOND", "true"),
        ("REDIS_PERSECOND_SOCKET_TYPE", "tcp"),
        ("REDIS_PERSECOND_URL", fast_url.as_str()),
    ];
    Rls::start(&main.url(), &[(file, cfg)], &env)
}

/// A per-second rule whose window is an hour (`unit_multiplier`), so that
/// the test never straddles a window; it goes to the per-second Redis by
/// its unit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_or_nothing_holds_across_the_per_second_redis() {
    not_near_hour_end();
    let main = Redis::start();
    let fast = Redis::start();
    let cfg = "domain: p
descriptors:
  - key: s1
    rate_limit: {unit: second, unit_multiplier: 3600, requests_per_unit: 1}
  - key: h100
    rate_limit: {unit: hour, requests_per_unit: 100}
  - key: s100
    rate_limit: {unit: second, unit_multiplier: 3600, requests_per_unit: 100}
  - key: h1
    rate_limit: {unit: hour, requests_per_unit: 1}
";
    let rls = start_per_second(&main, &fast, "p.yaml", cfg);
    let mut c = rls.client().await;
    let u = unique("u");
    let h = hour();
    // Refused by the per-second Redis: the hour counter is not charged.
    let mut oks = 0;
    for _ in 0..5 {
        let r = call(
            &mut c,
            request("p", vec![desc(&[("s1", &u)]), desc(&[("h100", &u)])]),
        )
        .await;
        if r.overall_code == OK {
            oks += 1;
        } else {
            assert_eq!(codes(&r), vec![OVER, OK], "{r:?}");
        }
    }
    assert_eq!(oks, 1);
    assert_eq!(main.get_int(&format!("p_h100_{u}_{h}")), 1);
    assert_eq!(fast.get_int(&format!("p_s1_{u}_{h}")), 1);
    // Refused by the main Redis: what the per-second one took is given back.
    let mut oks = 0;
    for _ in 0..5 {
        let r = call(
            &mut c,
            request("p", vec![desc(&[("s100", &u)]), desc(&[("h1", &u)])]),
        )
        .await;
        if r.overall_code == OK {
            oks += 1;
        } else {
            assert_eq!(codes(&r), vec![OK, OVER], "{r:?}");
            assert_eq!(remaining(&r)[0], 99, "{r:?}");
        }
    }
    assert_eq!(oks, 1);
    assert_eq!(fast.get_int(&format!("p_s100_{u}_{h}")), 1);
    assert_eq!(main.get_int(&format!("p_h1_{u}_{h}")), 1);
}

/// Descriptors with different hits are different `CL.THROTTLEALL` calls:
/// a refusal by one gives back what the other took.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_or_nothing_holds_across_different_hits() {
    not_near_hour_end();
    let redis = Redis::start();
    let cfg = "domain: q
descriptors:
  - key: small
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: big
    rate_limit: {unit: hour, requests_per_unit: 100}
";
    let rls = Rls::start(
        &redis.url(),
        &[("q.yaml", cfg)],
        &[("ALL_OR_NOTHING", "true")],
    );
    let mut c = rls.client().await;
    let u = unique("u");
    for i in 0..4 {
        let r = call(
            &mut c,
            request(
                "q",
                vec![
                    with_hits(desc(&[("small", &u)]), 1),
                    with_hits(desc(&[("big", &u)]), 10),
                ],
            ),
        )
        .await;
        let want = if i < 2 { OK } else { OVER };
        assert_eq!(r.overall_code, want, "request {i}: {r:?}");
    }
    let h = hour();
    assert_eq!(redis.get_int(&format!("q_small_{u}_{h}")), 2);
    assert_eq!(redis.get_int(&format!("q_big_{u}_{h}")), 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_descriptor_twice_is_charged_once_with_both_hits() {
    not_near_hour_end();
    let redis = Redis::start();
    let cfg = "domain: d
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 5}
  - key: gcra
    rate_limit: {unit: hour, requests_per_unit: 5, algorithm: gcra}
";
    let h = hour();
    for (mode, env) in [
        ("all-or-nothing", vec![("ALL_OR_NOTHING", "true")]),
        (
            "stop-increment",
            vec![("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "true")],
        ),
        ("default", vec![]),
    ] {
        let rls = Rls::start(&redis.url(), &[("d.yaml", cfg)], &env);
        let mut c = rls.client().await;
        let u = unique("u");
        let twice = |k: &str| request("d", vec![desc(&[(k, &u)]), desc(&[(k, &u)])]);
        // Together (all-or-nothing): the third pair needs 2 of the 1 left.
        // One after the other (the default mode, as the reference): the
        // fifth hit fits, the sixth does not.
        let third = if mode == "default" {
            vec![OK, OVER]
        } else {
            vec![OVER, OVER]
        };
        for (i, want) in [vec![OK, OK], vec![OK, OK], third].into_iter().enumerate() {
            let r = call(&mut c, twice("user")).await;
            assert_eq!(codes(&r), want, "{mode} {i}: {r:?}");
            let r = call(&mut c, twice("gcra")).await;
            assert_eq!(codes(&r), want, "{mode} gcra {i}: {r:?}");
        }
        // The default mode counts the refused hit too, as INCRBY does.
        let want = if mode == "default" { 6 } else { 4 };
        assert_eq!(redis.get_int(&format!("d_user_{u}_{h}")), want, "{mode}");
        let r = call(&mut c, request("d", vec![desc(&[("gcra", &u)])])).await;
        let want = if mode == "default" { OVER } else { OK };
        assert_eq!((codes(&r), remaining(&r)), (vec![want], vec![0]), "{mode}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn negative_hits_give_back() {
    not_near_hour_end();
    let redis = Redis::start();
    let cfg = "domain: n
descriptors:
  - key: fw
    rate_limit: {unit: hour, requests_per_unit: 5}
  - key: gcra
    rate_limit: {unit: hour, requests_per_unit: 5, algorithm: gcra}
  - key: sw
    rate_limit: {unit: hour, requests_per_unit: 5, algorithm: sliding_window}
";
    let h = hour();
    for env in [vec![], vec![("ALL_OR_NOTHING", "true")]] {
        let rls = Rls::start(&redis.url(), &[("n.yaml", cfg)], &env);
        let mut c = rls.client().await;
        let u = unique("u");
        for k in ["fw", "gcra", "sw"] {
            let r = call(&mut c, request("n", vec![with_hits(desc(&[(k, &u)]), 4)])).await;
            assert_eq!(remaining(&r), vec![1], "{k} {env:?}");
            let r = call(&mut c, request("n", vec![negative(desc(&[(k, &u)]), 2)])).await;
            assert_eq!(
                (r.overall_code, codes(&r), remaining(&r)),
                (OK, vec![OK], vec![3]),
                "{k} {env:?}: {r:?}"
            );
            // Never below empty, whatever the hits.
            let r = call(
                &mut c,
                request("n", vec![negative(desc(&[(k, &u)]), u64::MAX)]),
            )
            .await;
            assert_eq!((codes(&r), remaining(&r)), (vec![OK], vec![5]), "{k}");
            let r = call(&mut c, request("n", vec![with_hits(desc(&[(k, &u)]), 5)])).await;
            assert_eq!((codes(&r), remaining(&r)), (vec![OK], vec![0]), "{k}");
        }
        assert_eq!(redis.get_int(&format!("n_fw_{u}_{h}")), 5);
        // A refund is no hit of the limit.
        assert_eq!(
            rls.metric("ratelimit_service_rate_limit_total_hits{domain=\"n\",key1=\"fw\"}"),
            9
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_the_module_refuses_do_not_load() {
    let redis = Redis::start();
    for (rule, text) in [
        (
            "{unit: minute, unit_multiplier: 4294967295, requests_per_unit: 5}",
            "config.bad: unit_multiplier 4294967295 is out of range for unit MINUTE: a window is at most 5120927236 seconds",
        ),
        (
            "{unit: second, requests_per_unit: 4294967295, algorithm: gcra}",
            "config.bad: algorithm gcra with requests_per_unit 4294967295 is out of range for a window of 1 seconds: at most 1000000000 (one request per nanosecond)",
        ),
        (
            "{unit: year, unit_multiplier: 163, requests_per_unit: 5, algorithm: sliding_window}",
            "config.bad: unit_multiplier 163 is out of range for unit YEAR",
        ),
    ] {
        let cfg = format!("domain: b\ndescriptors:\n  - key: k\n    rate_limit: {rule}\n");
        let rls = Rls::start(&redis.url(), &[("bad.yaml", &cfg)], &[]);
        wait_until("the load error", std::time::Duration::from_secs(5), || {
            rls.log_text().contains(text)
        });
        assert_eq!(rls.metric("ratelimit_service_config_load_error"), 1);
        let mut c = rls.client().await;
        let e = c
            .should_rate_limit(request("b", vec![desc(&[("k", "v")])]))
            .await
            .expect_err("no config loaded");
        assert!(e.message().contains("no rate limit configuration"), "{e:?}");
    }
}

/// The largest values each bound accepts load and work: every request is
/// decided (no UNKNOWN), and charged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_largest_rules_that_load_work_against_the_module() {
    let redis = Redis::start();
    let mut cfg = String::from("domain: m\ndescriptors:\n");
    let mut keys = Vec::new();
    let units = [
        ("second", 1u64),
        ("minute", 60),
        ("hour", 3600),
        ("day", 86_400),
        ("week", 604_800),
        ("month", 2_592_000),
        ("year", 31_536_000),
    ];
    for algorithm in ["fixed_window", "sliding_window", "gcra"] {
        for (unit, secs) in units {
            let mult = (5_120_927_236 / secs).min(u64::from(u32::MAX));
            let k = format!("{algorithm}_{unit}");
            cfg.push_str(&format!(
                "  - key: {k}\n    rate_limit: {{unit: {unit}, unit_multiplier: {mult}, requests_per_unit: 3, algorithm: {algorithm}}}\n"
            ));
            keys.push((k, 2u32));
        }
    }
    // GCRA at one request per nanosecond, and with its largest burst.
    // (1 ns drains between a charge and a peek: one more may be left.)
    cfg.push_str("  - key: fastest\n    rate_limit: {unit: second, requests_per_unit: 1000000000, algorithm: gcra}\n");
    keys.push(("fastest".into(), 999_999_999));
    cfg.push_str("  - key: deepest\n    rate_limit: {unit: second, requests_per_unit: 1, algorithm: gcra, burst: 4294967295}\n");
    keys.push(("deepest".into(), 4_294_967_295));
    cfg.push_str("  - key: burst\n    rate_limit: {unit: year, unit_multiplier: 162, requests_per_unit: 4294967295, algorithm: gcra, burst: 4294967295}\n");
    keys.push(("burst".into(), 4_294_967_295));
    for env in [vec![], vec![("ALL_OR_NOTHING", "true")]] {
        let rls = Rls::start(&redis.url(), &[("m.yaml", &cfg)], &env);
        let mut c = rls.client().await;
        let u = unique("u");
        for (k, left) in &keys {
            let r = c
                .should_rate_limit(request("m", vec![desc(&[(k, &u)])]))
                .await
                .unwrap_or_else(|e| panic!("{k} {env:?}: {e:?}"))
                .into_inner();
            assert_eq!(codes(&r), vec![OK], "{k}");
            let got = remaining(&r)[0];
            let slack = u32::from(k == "fastest");
            assert!(
                (*left..=*left + slack).contains(&got),
                "{k} {env:?}: {got} left, expected {left}"
            );
        }
    }
}

/// `CL.THROTTLEALL` takes at most 100 limiters: a request with more is
/// several calls, held together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_or_nothing_takes_any_number_of_descriptors() {
    not_near_hour_end();
    let redis = Redis::start();
    let cfg = "domain: many
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 5}
  - key: closed
    rate_limit: {unit: hour, requests_per_unit: 0}
";
    let rls = Rls::start(
        &redis.url(),
        &[("many.yaml", cfg)],
        &[("ALL_OR_NOTHING", "true")],
    );
    let mut c = rls.client().await;
    let u = unique("u");
    let users: Vec<RateLimitDescriptor> = (0..250)
        .map(|i| desc(&[("user", &format!("{u}-{i}"))]))
        .collect();
    let r = call(&mut c, request("many", users.clone())).await;
    assert_eq!(r.overall_code, OK, "{r:?}");
    assert!(codes(&r).iter().all(|&c| c == OK));
    let mut refused = users;
    refused.push(desc(&[("closed", &u)]));
    let r = call(&mut c, request("many", refused)).await;
    assert_eq!(r.overall_code, OVER);
    assert_eq!(codes(&r)[250], OVER);
    let h = hour();
    for i in [0, 99, 100, 199, 200, 249] {
        assert_eq!(redis.get_int(&format!("many_user_{u}-{i}_{h}")), 1, "{i}");
    }
}

/// The main Redis and the per-second one with the service on both in
/// all-or-nothing mode, domain `f`: `s` on the per-second Redis (an
/// hour-long window of `s_limit` requests), `h` on the main one (100 an
/// hour). One request for both is charged.
struct Charged {
    _rls: Rls,
    c: Client,
    main: Redis,
    fast: Redis,
    u: String,
    /// The main Redis's counter of `h`.
    key: String,
}

impl Charged {
    async fn start(s_limit: u32) -> Charged {
        not_near_hour_end();
        let main = Redis::start();
        let fast = Redis::start();
        let cfg = format!(
            "domain: f
descriptors:
  - key: s
    rate_limit: {{unit: second, unit_multiplier: 3600, requests_per_unit: {s_limit}}}
  - key: h
    rate_limit: {{unit: hour, requests_per_unit: 100}}
"
        );
        let rls = start_per_second(&main, &fast, "f.yaml", &cfg);
        let c = rls.client().await;
        let u = unique("u");
        let mut t = Charged {
            key: format!("f_h_{u}_{}", hour()),
            main,
            fast,
            _rls: rls,
            c,
            u,
        };
        assert_eq!(t.call_both().await.overall_code, OK);
        assert_eq!(t.main.get_int(&t.key), 1);
        t
    }

    /// A request for both descriptors.
    fn both(&self) -> RateLimitRequest {
        request("f", vec![desc(&[("s", &self.u)]), desc(&[("h", &self.u)])])
    }

    async fn call_both(&mut self) -> RateLimitResponse {
        let both = self.both();
        call(&mut self.c, both).await
    }
}

/// A Redis that fails after the other charged: the charges are given back
/// and the request answers the error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_or_nothing_gives_back_when_the_other_redis_fails() {
    let mut t = Charged::start(100).await;
    t.fast.stop();
    let e =
        t.c.should_rate_limit(t.both())
            .await
            .expect_err("the per-second Redis is down");
    assert!(e.message().starts_with("redis error"), "{e:?}");
    assert_eq!(t.main.get_int(&t.key), 1);
}

/// A client that gives up (Envoy's deadline is 20 ms by default) while
/// the per-second Redis is still deciding: the request still finishes, and
/// the main Redis's charge of a refused request is given back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_or_nothing_gives_back_when_the_client_gives_up() {
    let mut t = Charged::start(1).await;
    // The per-second Redis answers 1 s late; the client waits 200 ms.
    t.fast.cmd(&["CLIENT", "PAUSE", "1000", "ALL"]);
    let mut r = tonic::Request::new(t.both());
    r.set_timeout(std::time::Duration::from_millis(200));
    assert!(
        t.c.should_rate_limit(r).await.is_err(),
        "the client gave up"
    );
    // Refused by the per-second limit: the hour's charge is given back
    // once the per-second Redis answers.
    wait_until(
        "the hour's charge given back",
        std::time::Duration::from_secs(8),
        || t.main.get_int(&t.key) == 1,
    );
    let r = t.call_both().await;
    assert_eq!(r.overall_code, OVER);
    assert_eq!(t.main.get_int(&t.key), 1);
}
