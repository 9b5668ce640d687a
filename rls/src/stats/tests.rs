use super::mapper::prom_name;
use super::*;

#[test]
fn mapper_names_and_labels() {
    assert_eq!(
        prom_name("ratelimit.service.rate_limit.rl.remote_address.total_hits"),
        (
            "ratelimit_service_rate_limit_total_hits".into(),
            vec![
                ("domain".into(), "rl".into()),
                ("key1".into(), "remote_address".into())
            ]
        )
    );
    let (n, l) = prom_name("ratelimit.service.rate_limit.rl.a_b.c_d.over_limit");
    assert_eq!(n, "ratelimit_service_rate_limit_over_limit");
    assert_eq!(l.len(), 3);
    assert_eq!(l[2], ("key2".into(), "c_d".into()));
    let (n, l) = prom_name("ratelimit.service.rate_limit.rl.a_b.c_d.e.over_limit");
    assert_eq!(n, "ratelimit_service_rate_limit_rl_a_b_c_d_e_over_limit");
    assert!(l.is_empty());
    assert_eq!(
        prom_name("ratelimit.service.call.should_rate_limit.redis_error").0,
        "ratelimit_service_should_rate_limit_error"
    );
    assert_eq!(
        prom_name("ratelimit.service.config_load_success").0,
        "ratelimit_service_config_load_success"
    );
    assert_eq!(
        prom_name("ratelimit_server.ShouldRateLimit.total_requests").0,
        "ratelimit_service_total_requests"
    );
}

#[test]
fn exposition_and_statsd_deltas() {
    let s = Stats::default();
    s.statsd.store(true, std::sync::atomic::Ordering::Relaxed);
    s.add_limit(
        "rl.k_v",
        &StatDelta {
            total_hits: 3,
            over_limit: 1,
            ..Default::default()
        },
    );
    s.time("ratelimit_server.ShouldRateLimit.response_time", 0.002);
    let text = s.prometheus();
    assert!(
        text.contains("ratelimit_service_rate_limit_total_hits{domain=\"rl\",key1=\"k_v\"} 3\n")
    );
    assert!(text.contains("# TYPE ratelimit_service_rate_limit_over_limit counter\n"));
    assert!(text.contains(
        "ratelimit_service_response_time_seconds_bucket{grpc_method=\"ShouldRateLimit\",le=\"0.005\"} 1\n"
    ));
    let lines = s.statsd_lines();
    assert!(lines.contains(&"ratelimit.service.rate_limit.rl.k_v.total_hits:3|c".to_string()));
    assert!(lines.contains(&"ratelimit_server.ShouldRateLimit.response_time:2|ms".to_string()));
    assert!(!lines.iter().any(|l| l.contains("near_limit")), "{lines:?}");
    s.add_limit(
        "rl.k_v",
        &StatDelta {
            total_hits: 2,
            ..Default::default()
        },
    );
    assert_eq!(
        s.statsd_lines(),
        vec!["ratelimit.service.rate_limit.rl.k_v.total_hits:2|c".to_string()]
    );
}

#[test]
fn counters_saturate() {
    let s = Stats::default();
    let hits = |n| StatDelta {
        total_hits: n,
        ..Default::default()
    };
    s.add_limit("rl.k_v", &hits(i64::MAX as u64));
    s.add_limit("rl.k_v", &hits(i64::MAX as u64));
    s.add_limit("rl.k_v", &hits(1));
    s.add_limit("rl.k_v", &hits(u64::MAX));
    assert_eq!(
        s.get("ratelimit.service.rate_limit.rl.k_v.total_hits"),
        u64::MAX
    );
    s.add("ratelimit.service.global_shadow_mode", u64::MAX);
    s.add("ratelimit.service.global_shadow_mode", 1);
    assert_eq!(s.get("ratelimit.service.global_shadow_mode"), u64::MAX);
    assert!(s
        .prometheus()
        .contains("ratelimit_service_rate_limit_total_hits{domain=\"rl\",key1=\"k_v\"} 18446744073709551615\n"));
}

#[test]
fn keys_beyond_the_cap_count_in_their_domains_overflow_key() {
    let s = Stats::new(3);
    let one = StatDelta {
        total_hits: 1,
        ..Default::default()
    };
    for i in 0..10 {
        s.add_limit(&format!("rl.user_{i}"), &one);
    }
    s.add_limit("other.k", &one);
    s.add_limit("rl.user_0", &one);
    assert_eq!(s.limit_keys(), 5, "three own keys and two overflow keys");
    assert_eq!(
        s.get("ratelimit.service.rate_limit.rl.user_0.total_hits"),
        2
    );
    assert_eq!(
        s.get("ratelimit.service.rate_limit.rl._overflow.total_hits"),
        7
    );
    assert_eq!(
        s.get("ratelimit.service.rate_limit.other._overflow.total_hits"),
        1
    );
    assert_eq!(
        s.get("ratelimit.service.rate_limit.rl.user_9.total_hits"),
        0
    );
}

#[test]
fn unknown_domains_are_one_series() {
    let s = Stats::new(2);
    for i in 0..100 {
        s.add(
            &format!("ratelimit.service.rate_limit.d{i}.domain_not_found"),
            1,
        );
    }
    s.add("a", 1);
    s.add("b", 1);
    s.add("c", 1);
    assert_eq!(s.get(DOMAIN_NOT_FOUND), 100);
    assert_eq!(s.get("a"), 1);
    assert_eq!(s.get("c"), 0);
    assert_eq!(s.get(COUNTER_OVERFLOW), 2, "b and c beyond two names");
    assert!(s
        .prometheus()
        .contains("ratelimit_service_rate_limit_domain_not_found 100\n"));
}

#[test]
fn values_with_dots_never_share_a_series() {
    // A detailed remote_address: "1.2.3.4" and "1.2.3.5" are two
    // series, not one duplicated (Prometheus drops duplicates).
    let s = Stats::default();
    for ip in ["1.2.3.4", "1.2.3.5"] {
        s.add_limit(
            &format!("rl.remote_address_{ip}"),
            &StatDelta {
                total_hits: 1,
                ..Default::default()
            },
        );
    }
    let text = s.prometheus();
    let mut series: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' ').map(|(k, _)| k))
        .collect();
    let n = series.len();
    series.sort();
    series.dedup();
    assert_eq!(series.len(), n, "{text}");
}

#[test]
fn a_key_longer_than_the_bound_counts_in_the_overflow() {
    let s = Stats::new(10);
    let d = StatDelta {
        total_hits: 1,
        ..Default::default()
    };
    let long = format!("rl.user_{}", "x".repeat(MAX_KEY_BYTES));
    s.add_limit(&long, &d);
    s.add_limit(&long, &d);
    s.add_limit(&format!("rl.user_{}", "x".repeat(MAX_KEY_BYTES - 8)), &d);
    assert_eq!(s.limit_keys(), 2);
    assert_eq!(
        s.get("ratelimit.service.rate_limit.rl._overflow.total_hits"),
        2
    );
    assert!(!s.prometheus().contains(&"x".repeat(MAX_KEY_BYTES)));
}

fn hits(n: u64) -> StatDelta {
    StatDelta {
        total_hits: n,
        ..Default::default()
    }
}

fn tagged(dog_statsd: bool) -> Stats {
    let s = Stats::with_options(Options {
        max_keys: 10,
        // As gostats: sorted by key, a value's `.`, `:` and `|` as `_`,
        // an empty key or value left out.
        tags: [("foo", "b.a:r|"), ("a", "b"), ("empty", ""), ("", "v")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        dog_statsd,
        ..Options::default()
    });
    s.statsd.store(true, Ordering::Relaxed);
    s
}

#[test]
fn extra_tags_in_statsd_names_as_gostats_serializes_them() {
    let s = tagged(false);
    s.add_limit("rl.k_v", &hits(2));
    s.add("ratelimit.service.config_load_success", 1);
    s.time("ratelimit_server.ShouldRateLimit.response_time", 0.003);
    let lines = s.statsd_lines();
    for want in [
        "ratelimit.service.rate_limit.rl.k_v.total_hits.__a=b.__foo=b_a_r_:2|c",
        "ratelimit.service.config_load_success.__a=b.__foo=b_a_r_:1|c",
        "ratelimit_server.ShouldRateLimit.response_time.__a=b.__foo=b_a_r_:3|ms",
    ] {
        assert!(lines.contains(&want.to_string()), "{want} not in {lines:?}");
    }
    // The counters themselves are named without them.
    assert_eq!(s.get("ratelimit.service.rate_limit.rl.k_v.total_hits"), 2);
    // Prometheus sees the tagged names, which the reference's mapping does
    // not match: escaped, as its sink exports them.
    let text = s.prometheus();
    assert!(
        text.contains("ratelimit_service_rate_limit_rl_k_v_total_hits___a_b___foo_b_a_r_ 2\n"),
        "{text}"
    );
}

#[test]
fn extra_tags_as_dogstatsd_tags() {
    let s = tagged(true);
    s.add_limit("rl.k_v", &hits(2));
    s.time("ratelimit_server.ShouldRateLimit.response_time", 0.003);
    let lines = s.statsd_lines();
    assert!(lines.contains(
        &"ratelimit.service.rate_limit.rl.k_v.total_hits:2|c|#a:b,foo:b_a_r_".to_string()
    ));
    assert!(lines.contains(
        &"ratelimit_server.ShouldRateLimit.response_time:3|ms|#a:b,foo:b_a_r_".to_string()
    ));
    // Without tags, plain lines.
    let plain = Stats::with_options(Options {
        max_keys: 10,
        dog_statsd: true,
        ..Options::default()
    });
    plain.add("x", 1);
    assert_eq!(plain.statsd_lines(), vec!["x:1|c".to_string()]);
}

#[test]
fn response_time_in_seconds_or_milliseconds() {
    let rt = "ratelimit_server.ShouldRateLimit.response_time";
    let secs = Stats::default();
    secs.time(rt, 0.02);
    let text = secs.prometheus();
    assert!(text.contains("# TYPE ratelimit_service_response_time_seconds histogram\n"));
    assert!(text.contains(
        "ratelimit_service_response_time_seconds_bucket{grpc_method=\"ShouldRateLimit\",le=\"0.01\"} 0\n"
    ));
    assert!(text.contains(
        "ratelimit_service_response_time_seconds_bucket{grpc_method=\"ShouldRateLimit\",le=\"0.025\"} 1\n"
    ));
    assert!(text.contains(
        "ratelimit_service_response_time_seconds_sum{grpc_method=\"ShouldRateLimit\"} 0.02\n"
    ));
    // In milliseconds: the same name and buckets, 20 for 20 ms.
    let ms = Stats::with_options(Options {
        max_keys: 10,
        response_time_ms: true,
        ..Options::default()
    });
    ms.time(rt, 0.02);
    let text = ms.prometheus();
    assert!(text.contains(
        "ratelimit_service_response_time_seconds_bucket{grpc_method=\"ShouldRateLimit\",le=\"10\"} 0\n"
    ));
    assert!(text.contains(
        "ratelimit_service_response_time_seconds_bucket{grpc_method=\"ShouldRateLimit\",le=\"+Inf\"} 1\n"
    ));
    assert!(text.contains(
        "ratelimit_service_response_time_seconds_sum{grpc_method=\"ShouldRateLimit\"} 20\n"
    ));
}

#[test]
fn a_mapping_file_names_the_series_and_sums_what_it_merges() {
    let m = mapper::Mapper::from_yaml(
        r#"
mappings:
  - match: "ratelimit.service.rate_limit.*.*.*"
    name: "rl_$3"
    labels:
      domain: "$1"
  - match: "ratelimit_server.*.response_time"
    name: "rt_ms"
    histogram_options:
      buckets: [1, 100]
  - match: "ratelimit.service.config_load_success"
    action: drop
    name: dropped
"#,
    )
    .unwrap();
    let s = Stats::with_options(Options {
        max_keys: 10,
        mapper: Some(m),
        ..Options::default()
    });
    s.add_limit("rl.a", &hits(2));
    s.add_limit("rl.b", &hits(3));
    s.add("ratelimit.service.config_load_success", 1);
    s.time("ratelimit_server.ShouldRateLimit.response_time", 0.05);
    let text = s.prometheus();
    assert!(
        text.contains("# TYPE rl_total_hits counter\nrl_total_hits{domain=\"rl\"} 5\n"),
        "{text}"
    );
    assert!(!text.contains("config_load"), "{text}");
    assert!(
        text.contains("rt_ms_bucket{le=\"1\"} 0\nrt_ms_bucket{le=\"100\"} 1\n"),
        "{text}"
    );
    assert!(text.contains("rt_ms_sum 50\n"), "{text}");
}

#[test]
fn the_local_cache_counter_shows_once_it_counts() {
    let s = Stats::default();
    s.add_limit("rl.k_v", &hits(1));
    assert!(!s.prometheus().contains("local_cache"));
    s.add_limit(
        "rl.k_v",
        &StatDelta {
            total_hits: 2,
            over_limit: 2,
            over_limit_with_local_cache: 2,
            ..Default::default()
        },
    );
    assert_eq!(
        s.get("ratelimit.service.rate_limit.rl.k_v.over_limit_with_local_cache"),
        2
    );
    let text = s.prometheus();
    assert!(
        text.contains("ratelimit_service_rate_limit_over_limit{domain=\"rl\",key1=\"k_v\"} 2\n")
    );
    // The reference's mapping names no such stat: its escaped name.
    assert!(
        text.contains("ratelimit_service_rate_limit_rl_k_v_over_limit_with_local_cache 2\n"),
        "{text}"
    );
}
