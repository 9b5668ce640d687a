//! The service over gRPC against a real server with the module: the API
//! rules, validation and reload, stats, shadow mode, replaces, unlimited,
//! overrides, quota mode and the extensions.

use std::time::Duration;

use crate::support::*;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::RateLimitOverride;
use envoy_types::pb::google::protobuf::UInt64Value;

const CONFIG: &str = r#"
domain: api
descriptors:
  - key: user
    rate_limit:
      unit: hour
      requests_per_unit: 3
  - key: path
    value: /login
    rate_limit:
      unit: hour
      requests_per_unit: 2
      name: login
  - key: path
    rate_limit:
      unit: hour
      requests_per_unit: 50
  - key: tenant
    rate_limit:
      unit: hour
      requests_per_unit: 4
      replaces:
        - name: login
  - key: internal
    rate_limit:
      unlimited: true
  - key: trial
    shadow_mode: true
    rate_limit:
      unit: hour
      requests_per_unit: 1
  - key: quota
    quota_mode: true
    rate_limit:
      unit: hour
      requests_per_unit: 1
"#;

const EXT: &str = r#"
domain: ext
descriptors:
  - key: gcra
    rate_limit:
      unit: hour
      requests_per_unit: 2
      algorithm: gcra
  - key: sliding
    rate_limit:
      unit: minute
      unit_multiplier: 5
      requests_per_unit: 2
      algorithm: sliding_window
  - key: small
    rate_limit:
      unit: hour
      requests_per_unit: 1
  - key: big
    rate_limit:
      unit: hour
      requests_per_unit: 10
  - key: shadowgcra
    shadow_mode: true
    rate_limit:
      unit: hour
      requests_per_unit: 1
      algorithm: gcra
"#;

/// The overall codes of `n` requests of one descriptor, one after the
/// other.
async fn overall_codes(
    c: &mut Client,
    domain: &str,
    entries: &[(&str, &str)],
    n: usize,
) -> Vec<i32> {
    let mut got = Vec::new();
    for _ in 0..n {
        got.push(
            call(c, request(domain, vec![desc(entries)]))
                .await
                .overall_code,
        );
    }
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_rules_and_counting() {
    not_near_hour_end();
    let redis = Redis::start();
    let rls = Rls::start(&redis.url(), &[("api.yaml", CONFIG)], &[]);
    let mut c = rls.client().await;
    let u = unique("u");

    // Empty domain and empty descriptor list are errors with the reference's texts.
    let e = c
        .should_rate_limit(request("", vec![desc(&[("user", "x")])]))
        .await
        .unwrap_err();
    assert_eq!(e.message(), "rate limit domain must not be empty");
    let e = c
        .should_rate_limit(request("api", vec![]))
        .await
        .unwrap_err();
    assert_eq!(e.message(), "rate limit descriptor list must not be empty");

    // 3 per hour: OK, OK, OK, OVER, with remaining 2, 1, 0 and the reference's key.
    let mut remaining = Vec::new();
    for _ in 0..4 {
        let r = call(&mut c, request("api", vec![desc(&[("user", &u)])])).await;
        remaining.push((r.overall_code, r.statuses[0].limit_remaining));
        let s = &r.statuses[0];
        let l = s.current_limit.as_ref().unwrap();
        assert_eq!((l.requests_per_unit, l.unit), (3, 3));
        let reset = s.duration_until_reset.as_ref().unwrap().seconds;
        assert!(reset > 0 && reset <= 3600, "{reset}");
    }
    assert_eq!(remaining, vec![(OK, 2), (OK, 1), (OK, 0), (OVER, 0)]);
    let window = hour();
    // The counter counts refused hits too, as the reference's INCRBY does.
    assert_eq!(redis.get_int(&format!("api_user_{u}_{window}")), 4);
    let ttl: i64 = redis
        .cmd(&["TTL", &format!("api_user_{u}_{window}")])
        .trim_start_matches(':')
        .trim()
        .parse()
        .unwrap();
    assert!(ttl > 0 && ttl <= 3600, "{ttl}");

    // A descriptor matching no rule is OK without a limit; an unknown domain too.
    let r = call(&mut c, request("api", vec![desc(&[("nothing", "x")])])).await;
    assert_eq!(
        (r.overall_code, r.statuses[0].current_limit.clone()),
        (OK, None)
    );
    let r = call(&mut c, request("nodomain", vec![desc(&[("user", "x")])])).await;
    assert_eq!(r.overall_code, OK);

    // Unlimited: OK with remaining u32::MAX.
    let r = call(&mut c, request("api", vec![desc(&[("internal", "x")])])).await;
    assert_eq!(
        (r.overall_code, r.statuses[0].limit_remaining),
        (OK, u32::MAX)
    );

    // hits_addend: the request's, then a descriptor's own (0 only looks).
    let u2 = unique("h");
    let mut req = request("api", vec![desc(&[("user", &u2)])]);
    req.hits_addend = 2;
    let r = call(&mut c, req).await;
    assert_eq!(r.statuses[0].limit_remaining, 1);
    let mut d = desc(&[("user", &u2)]);
    d.hits_addend = Some(UInt64Value { value: 0 });
    let r = call(&mut c, request("api", vec![d])).await;
    assert_eq!((r.overall_code, r.statuses[0].limit_remaining), (OK, 1));
    let mut d = desc(&[("user", &u2)]);
    d.hits_addend = Some(UInt64Value { value: 2 });
    let r = call(&mut c, request("api", vec![d])).await;
    assert_eq!(r.overall_code, OVER);

    // The override: the request's own limit, keyed like the reference.
    let u3 = unique("o");
    let mut d = desc(&[("anything", &u3)]);
    d.limit = Some(RateLimitOverride {
        requests_per_unit: 1,
        unit: 3,
    });
    let r1 = call(&mut c, request("api", vec![d.clone()])).await;
    let r2 = call(&mut c, request("api", vec![d])).await;
    assert_eq!((r1.overall_code, r2.overall_code), (OK, OVER));
    assert_eq!(limit_of(&r1), Some(1));

    // key+value before key only.
    let r = call(&mut c, request("api", vec![desc(&[("path", "/login")])])).await;
    assert_eq!(limit_of(&r), Some(2));
    let r = call(&mut c, request("api", vec![desc(&[("path", "/x")])])).await;
    assert_eq!(limit_of(&r), Some(50));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replaces_shadow_quota_and_metrics() {
    not_near_hour_end();
    let redis = Redis::start();
    let rls = Rls::start(&redis.url(), &[("api.yaml", CONFIG)], &[]);
    let mut c = rls.client().await;
    let t = unique("t");

    // `tenant` replaces `login`: the login limit (2) is not checked.
    for i in 0..3 {
        let r = call(
            &mut c,
            request(
                "api",
                vec![desc(&[("path", "/login")]), desc(&[("tenant", &t)])],
            ),
        )
        .await;
        assert_eq!(r.overall_code, OK, "request {i}");
        assert_eq!(r.statuses[0].current_limit, None);
    }

    // Shadow mode: over the limit, answered OK, counted as shadow_mode.
    let s = unique("s");
    for _ in 0..3 {
        let r = call(&mut c, request("api", vec![desc(&[("trial", &s)])])).await;
        assert_eq!(r.overall_code, OK);
    }
    // Quota mode: the only quota descriptor over means OVER_LIMIT;
    // with a normal descriptor that passes as well, still over (all quota over).
    let q = unique("q");
    let r = call(&mut c, request("api", vec![desc(&[("quota", &q)])])).await;
    assert_eq!(r.overall_code, OK);
    let r = call(&mut c, request("api", vec![desc(&[("quota", &q)])])).await;
    assert_eq!((r.overall_code, codes(&r)), (OVER, vec![OVER]));

    let m = rls.metrics();
    let v = |p: &str| rls.metric(p);
    assert_eq!(
        v("ratelimit_service_rate_limit_total_hits{domain=\"api\",key1=\"trial\"}"),
        3,
        "{m}"
    );
    assert_eq!(
        v("ratelimit_service_rate_limit_shadow_mode{domain=\"api\",key1=\"trial\"}"),
        2,
        "{m}"
    );
    assert_eq!(
        v("ratelimit_service_rate_limit_over_limit{domain=\"api\",key1=\"trial\"}"),
        2,
        "{m}"
    );
    assert_eq!(
        v("ratelimit_service_rate_limit_within_limit{domain=\"api\",key1=\"trial\"}"),
        1,
        "{m}"
    );
    assert_eq!(
        v("ratelimit_service_rate_limit_over_limit{domain=\"api\",key1=\"quota\"}"),
        1,
        "{m}"
    );
    assert_eq!(v("ratelimit_service_config_load_success"), 1, "{m}");
    assert!(
        v("ratelimit_service_total_requests{grpc_method=\"ShouldRateLimit\"}") >= 8,
        "{m}"
    );
    assert!(m.contains("ratelimit_service_response_time_seconds_bucket{grpc_method=\"ShouldRateLimit\",le=\"+Inf\"}"), "{m}");

    // /json, /rlconfig, health.
    let body = format!("{{\"domain\":\"api\",\"descriptors\":[{{\"entries\":[{{\"key\":\"quota\",\"value\":\"{q}\"}}]}}]}}");
    let (code, text) = http_post_json(rls.http_port, &body).unwrap();
    assert_eq!(code, 429, "{text}");
    assert!(text.contains("\"overallCode\":\"OVER_LIMIT\""), "{text}");
    let (code, dump) = http_get(rls.debug_port, "/rlconfig").unwrap();
    assert_eq!(code, 200);
    assert!(
        dump.contains(
            "api.user: unit=HOUR requests_per_unit=3, shadow_mode: false, quota_mode: false"
        ),
        "{dump}"
    );
}

fn swap_to(root: &std::path::Path, name: &str, files: &[(&str, &str)]) {
    let data = root.join(name);
    std::fs::create_dir_all(data.join("config")).unwrap();
    for (f, t) in files {
        std::fs::write(data.join("config").join(f), t).unwrap();
    }
    let tmp = root.join("current.tmp");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(&data, &tmp).unwrap();
    std::fs::rename(&tmp, root.join("current")).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_good_bad_and_symlink_swap() {
    not_near_hour_end();
    let redis = Redis::start();
    let one =
        "domain: r\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1}\n";
    let rls = Rls::start(&redis.url(), &[("r.yaml", one)], &[]);
    let mut c = rls.client().await;
    let k = unique("k");
    assert_eq!(
        limit_of(&call(&mut c, request("r", vec![desc(&[("k", &k)])])).await),
        Some(1)
    );

    // A change in place.
    let data = std::fs::canonicalize(rls.root.join("current")).unwrap();
    std::fs::write(
        data.join("config/r.yaml"),
        one.replace("requests_per_unit: 1", "requests_per_unit: 7"),
    )
    .unwrap();
    wait_until("config reload", Duration::from_secs(10), || {
        rls.metric("ratelimit_service_config_load_success") == 2
    });
    assert_eq!(
        limit_of(&call(&mut c, request("r", vec![desc(&[("k", &k)])])).await),
        Some(7)
    );

    // A bad file: counted as an error, the last good config stays.
    std::fs::write(
        data.join("config/bad.yaml"),
        "domain: r2\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight}\n",
    )
    .unwrap();
    wait_until("config load error", Duration::from_secs(10), || {
        rls.metric("ratelimit_service_config_load_error") == 1
    });
    assert!(
        rls.log_text()
            .contains("config.bad: invalid rate limit unit 'fortnight'"),
        "{}",
        rls.log_text()
    );
    assert_eq!(
        limit_of(&call(&mut c, request("r", vec![desc(&[("k", &k)])])).await),
        Some(7)
    );

    // A symlink swap to a new directory.
    swap_to(
        &rls.root,
        "data2",
        &[(
            "r.yaml",
            &one.replace("requests_per_unit: 1", "requests_per_unit: 9"),
        )],
    );
    wait_until("config reload after swap", Duration::from_secs(10), || {
        rls.metric("ratelimit_service_config_load_success") == 3
    });
    let r = call(&mut c, request("r", vec![desc(&[("k", &k)])])).await;
    assert_eq!(
        limit_of(&r),
        Some(9),
        "{r:?}\nconfig now: {:?}\n{}",
        std::fs::canonicalize(rls.root.join("current")),
        rls.log_text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extensions_gcra_sliding_shadow() {
    not_near_hour_end();
    let redis = Redis::start();
    let rls = Rls::start(&redis.url(), &[("ext.yaml", EXT)], &[]);
    let mut c = rls.client().await;

    // GCRA, 2 per hour, burst defaults to a full window: 2 then refused.
    let g = unique("g");
    assert_eq!(
        overall_codes(&mut c, "ext", &[("gcra", &g)], 3).await,
        vec![OK, OK, OVER]
    );
    assert!(redis
        .cmd(&["TYPE", &format!("ext_gcra_{g}_gcra")])
        .contains("string"));

    // Sliding window of 5 minutes, 2 allowed; the refusal wrote nothing.
    let s = unique("s");
    assert_eq!(
        overall_codes(&mut c, "ext", &[("sliding", &s)], 3).await,
        vec![OK, OK, OVER]
    );
    assert!(
        redis
            .cmd(&["TYPE", &format!("ext_sliding_{s}_sw")])
            .contains("cell-swin"),
        "{}",
        redis.cmd(&["TYPE", &format!("ext_sliding_{s}_sw")])
    );

    // Shadow through the module's SHADOW: answered OK, counted by the module.
    let shadow_refused = || -> i64 {
        let info = redis.cmd(&["INFO", "redis-cell"]);
        info.lines()
            .find_map(|l| l.strip_prefix("redis-cell_cl_throttle_shadow_refused:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no shadow_refused in {info}"))
    };
    let before = shadow_refused();
    let sh = unique("sh");
    for _ in 0..3 {
        let r = call(&mut c, request("ext", vec![desc(&[("shadowgcra", &sh)])])).await;
        assert_eq!(r.overall_code, OK);
    }
    assert_eq!(
        rls.metric("ratelimit_service_rate_limit_shadow_mode{domain=\"ext\",key1=\"shadowgcra\"}"),
        2
    );
    assert_eq!(
        shadow_refused() - before,
        2,
        "the module counts the shadow refusals"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_or_nothing_in_one_call() {
    not_near_hour_end();
    let redis = Redis::start();
    // Reference mode first: a request refused by `small` still uses up `big`.
    let rls = Rls::start(&redis.url(), &[("ext.yaml", EXT)], &[]);
    let mut c = rls.client().await;
    let a = unique("a");
    let window = hour();
    for _ in 0..3 {
        call(
            &mut c,
            request("ext", vec![desc(&[("small", &a)]), desc(&[("big", &a)])]),
        )
        .await;
    }
    assert_eq!(redis.get_int(&format!("ext_big_{a}_{window}")), 3);
    drop(c);
    drop(rls);

    // All-or-nothing (STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT): refused requests charge nothing.
    let rls = Rls::start(
        &redis.url(),
        &[("ext.yaml", EXT)],
        &[("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "true")],
    );
    let mut c = rls.client().await;
    let b = unique("b");
    let mut got = Vec::new();
    for _ in 0..3 {
        let r = call(
            &mut c,
            request("ext", vec![desc(&[("small", &b)]), desc(&[("big", &b)])]),
        )
        .await;
        got.push((r.overall_code, codes(&r), r.statuses[1].limit_remaining));
    }
    assert_eq!(
        got,
        vec![
            (OK, vec![OK, OK], 9),
            (OVER, vec![OVER, OK], 9),
            (OVER, vec![OVER, OK], 9)
        ]
    );
    assert_eq!(redis.get_int(&format!("ext_big_{b}_{window}")), 1);
    assert_eq!(redis.get_int(&format!("ext_small_{b}_{window}")), 1);
    let stats = redis.cmd(&["INFO", "commandstats"]);
    assert!(stats.contains("cmdstat_cl.throttleall:calls="), "{stats}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statsd_over_loopback_and_grpc_health() {
    let redis = Redis::start();
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let port = sock.local_addr().unwrap().port().to_string();
    let rls = Rls::start(
        &redis.url(),
        &[("api.yaml", CONFIG)],
        &[
            ("USE_PROMETHEUS", "false"),
            ("USE_STATSD", "true"),
            ("STATSD_HOST", "127.0.0.1"),
            ("STATSD_PORT", &port),
            ("STATS_FLUSH_INTERVAL", "100ms"),
        ],
    );
    let mut c = rls.client().await;
    call(
        &mut c,
        request("api", vec![desc(&[("user", &unique("st"))])]),
    )
    .await;
    let mut seen = String::new();
    let mut buf = [0u8; 65536];
    while !seen.contains("ratelimit.service.rate_limit.api.user.total_hits:1|c") {
        let n = sock.recv(&mut buf).expect("a statsd packet within 10 s");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        seen.push('\n');
    }
    assert!(
        seen.contains("ratelimit.service.config_load_success:1|c"),
        "{seen}"
    );

    assert_eq!(
        grpc_health(&rls, "").await,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_second_limits_on_their_own_redis() {
    not_near_hour_end();
    let main = Redis::start();
    let fast = Redis::start();
    let cfg = "domain: p\ndescriptors:\n  - key: s\n    rate_limit: {unit: second, requests_per_unit: 100}\n  - key: h\n    rate_limit: {unit: hour, requests_per_unit: 100}\n";
    let rls = Rls::start(
        &main.url(),
        &[("p.yaml", cfg)],
        &[
            ("REDIS_PERSECOND", "true"),
            ("REDIS_PERSECOND_SOCKET_TYPE", "tcp"),
            ("REDIS_PERSECOND_URL", &fast.url()),
        ],
    );
    let mut c = rls.client().await;
    let u = unique("u");
    let r = call(
        &mut c,
        request("p", vec![desc(&[("s", &u)]), desc(&[("h", &u)])]),
    )
    .await;
    assert_eq!(codes(&r), vec![OK, OK]);
    let window = hour();
    assert_eq!(main.get_int(&format!("p_h_{u}_{window}")), 1);
    // The per-second counter expires within a second: check where the
    // command ran instead of looking for the key.
    let fw_calls = |r: &Redis| -> u64 {
        let stats = r.cmd(&["INFO", "commandstats"]);
        stats
            .lines()
            .find_map(|l| l.strip_prefix("cmdstat_fw.incr:calls="))
            .and_then(|v| v.split(',').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    assert_eq!((fw_calls(&main), fw_calls(&fast)), (1, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wildcards_nested_and_share_threshold() {
    not_near_hour_end();
    let redis = Redis::start();
    let cfg = r#"
domain: w
descriptors:
  - key: file
    value: doc*
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: path
    value: /api/*
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: org
    descriptors:
      - key: user
        rate_limit: {unit: hour, requests_per_unit: 1}
"#;
    let rls = Rls::start(&redis.url(), &[("w.yaml", cfg)], &[]);
    let mut c = rls.client().await;
    let window = hour();
    // share_threshold: every value matching doc* shares one counter.
    let mut got = Vec::new();
    for v in ["doc1", "docs.pdf", "doc-x"] {
        got.push(
            call(&mut c, request("w", vec![desc(&[("file", v)])]))
                .await
                .overall_code,
        );
    }
    assert_eq!(got, vec![OK, OK, OVER]);
    assert_eq!(redis.get_int(&format!("w_file_doc*_{window}")), 3);
    // Without it each value matching /api/* has its own counter.
    for v in ["/api/a", "/api/b"] {
        assert_eq!(
            call(&mut c, request("w", vec![desc(&[("path", v)])]))
                .await
                .overall_code,
            OK
        );
    }
    // Nested: the limit applies at the depth of the request's last entry.
    let o = unique("o");
    let two = || desc(&[("org", &o), ("user", "u")]);
    assert_eq!(
        call(&mut c, request("w", vec![two()])).await.overall_code,
        OK
    );
    assert_eq!(
        call(&mut c, request("w", vec![two()])).await.overall_code,
        OVER
    );
    assert_eq!(redis.get_int(&format!("w_org_{o}_user_u_{window}")), 2);
    let r = call(&mut c, request("w", vec![desc(&[("org", &o)])])).await;
    assert_eq!(
        (r.overall_code, r.statuses[0].current_limit.clone()),
        (OK, None)
    );
}
