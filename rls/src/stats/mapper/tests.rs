use super::*;

/// Envoy Gateway's file (`internal/infrastructure/kubernetes/ratelimit/statsd_conf.yaml`),
/// in the rules that matter: a glob per stat, a regex for deeper keys, and
/// the response time without `scale`.
const GATEWAY: &str = r#"
# Requires statsd exporter >= v0.6.0 since it uses the "drop" action.
mappings:
  - match: "ratelimit.service.rate_limit.*.*.total_hits"
    name: "ratelimit_service_rate_limit_total_hits"
    timer_type: "histogram"
    labels:
      domain: "$1"
      key1: "$2"
  - match: "ratelimit\\.service\\.rate_limit\\.([^\\.]*)\\.([^\\.]*)\\.([^\\.]*)(\\..*)?\\.total_hits"
    match_type: regex
    name: "ratelimit_service_rate_limit_total_hits"
    timer_type: "histogram"
    labels:
      domain: "$1"
      key1: "$2"
      key2: "$3"
  - match: "ratelimit.service.call.should_rate_limit.*"
    name: "ratelimit_service_should_rate_limit_error"
    match_metric_type: counter
    labels:
      err_type: "$1"
  - match: "ratelimit_server.*.response_time"
    name: "ratelimit_service_response_time_seconds"
    timer_type: histogram
    labels:
      grpc_method: "$1"
  - match: "ratelimit.service.config_load_success"
    name: "ratelimit_service_config_load_success"
    match_metric_type: counter
"#;

fn labels(l: &[(&str, &str)]) -> Vec<(String, String)> {
    l.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn envoy_gateways_file_maps_as_statsd_exporter() {
    let m = Mapper::from_yaml(GATEWAY).unwrap();
    let c = |s: &str| m.map(s, Kind::Counter).unwrap();
    let hits = c("ratelimit.service.rate_limit.edge.user_alice.total_hits");
    assert_eq!(hits.name, "ratelimit_service_rate_limit_total_hits");
    assert_eq!(
        hits.labels,
        labels(&[("domain", "edge"), ("key1", "user_alice")])
    );
    // Globs first; then the regex, unanchored, for a deeper key.
    let deep = c("ratelimit.service.rate_limit.edge.a.b.c.total_hits");
    assert_eq!(
        deep.labels,
        labels(&[("domain", "edge"), ("key1", "a"), ("key2", "b")])
    );
    assert_eq!(
        c("ratelimit.service.call.should_rate_limit.redis_error").labels,
        labels(&[("err_type", "redis_error")])
    );
    assert_eq!(
        c("ratelimit.service.config_load_success").name,
        "ratelimit_service_config_load_success"
    );
    // No rule: the escaped name.
    let other = c("ratelimit.service.rate_limit.edge.user.over_limit");
    assert_eq!(
        (other.name.as_str(), other.labels.len()),
        ("ratelimit_service_rate_limit_edge_user_over_limit", 0)
    );
    // `match_metric_type: counter` maps no timer.
    assert_eq!(
        m.map("ratelimit.service.call.should_rate_limit.x", Kind::Observer)
            .unwrap()
            .name,
        "ratelimit_service_call_should_rate_limit_x"
    );
    // The response time in milliseconds (no scale), default buckets.
    let t = m
        .map(
            "ratelimit_server.ShouldRateLimit.response_time",
            Kind::Observer,
        )
        .unwrap();
    assert_eq!(t.name, "ratelimit_service_response_time_seconds");
    assert_eq!((t.scale, t.buckets.as_slice()), (1.0, DEFAULT_BUCKETS));
}

#[test]
fn the_references_default_file_parses() {
    // The reference's default_mapper.yaml's shape: every key it uses.
    let m = Mapper::from_yaml(
        r#"
mappings:
  - match: "ratelimit_server.*.response_time"
    name: "ratelimit_service_response_time_seconds"
    timer_type: histogram
    scale: 0.001
    labels:
      grpc_method: "$1"
"#,
    )
    .unwrap();
    let t = m
        .map(
            "ratelimit_server.ShouldRateLimit.response_time",
            Kind::Observer,
        )
        .unwrap();
    assert_eq!(t.scale, 0.001);
    assert_eq!(t.labels, labels(&[("grpc_method", "ShouldRateLimit")]));
}

#[test]
fn templates_buckets_drop_and_defaults() {
    let m = Mapper::from_yaml(
        r#"
defaults:
  match_type: glob
  histogram_options:
    buckets: [1, 5, 25]
mappings:
  - match: "ratelimit.service.rate_limit.*.*.near_limit"
    action: drop
    name: dropped
  - match: "ratelimit.service.rate_limit.*.*.*"
    name: "rl_${3}"
    labels:
      where: "$1/$2"
      literal: "cost $$1"
  - match: "(.*)\\.response_time"
    match_type: regex
    name: "rt_seconds"
    scale: 0.001
    histogram_options:
      buckets: [0.1, 1]
  - match: "a.*"
    name: "a_$1"
"#,
    )
    .unwrap();
    assert_eq!(
        m.map("ratelimit.service.rate_limit.d.k.near_limit", Kind::Counter),
        None
    );
    let hit = m
        .map("ratelimit.service.rate_limit.d.k.total_hits", Kind::Counter)
        .unwrap();
    assert_eq!(hit.name, "rl_total_hits");
    assert_eq!(
        hit.labels,
        labels(&[("literal", "cost $1"), ("where", "d/k")])
    );
    let t = m
        .map("ratelimit_server.X.response_time", Kind::Observer)
        .unwrap();
    assert_eq!((t.name.as_str(), t.scale), ("rt_seconds", 0.001));
    assert_eq!(t.buckets, vec![0.1, 1.0]);
    // A glob rule without buckets takes the defaults'.
    assert_eq!(
        m.map("a.b", Kind::Observer).unwrap().buckets,
        vec![1.0, 5.0, 25.0]
    );
    let legacy =
        Mapper::from_yaml("defaults:\n  buckets: [1, 2]\nmappings:\n  - match: a.*\n    name: a\n")
            .unwrap();
    assert_eq!(
        legacy.map("a.b", Kind::Observer).unwrap().buckets,
        vec![1.0, 2.0]
    );
    // A captured part that is not valid in a name is escaped.
    assert_eq!(m.map("a.b-c", Kind::Counter).unwrap().name, "a_b_c");
}

#[test]
fn malformed_files_are_refused_with_the_reason() {
    let bad = |y: &str| Mapper::from_yaml(y).unwrap_err().0;
    assert!(bad("mappings: [").starts_with("invalid YAML: "));
    assert_eq!(bad("mapings: []"), "unknown key 'mapings'");
    assert_eq!(bad("mappings: 3"), "mappings: not a list");
    assert_eq!(
        bad("mappings:\n  - match: a.*\n"),
        "mapping 1: metric mapping didn't set a metric name"
    );
    assert_eq!(bad("mappings:\n  - name: a\n"), "mapping 1: no match");
    assert_eq!(
        bad("mappings:\n  - match: a\n    action: drop\n"),
        "mapping 1: metric mapping didn't set a metric name"
    );
    assert_eq!(
        bad("mappings:\n  - match: a.b*\n    name: x\n"),
        "mapping 1: invalid match: a.b*"
    );
    assert!(bad("mappings:\n  - match: a\n    name: 1x\n")
        .starts_with("mapping 1: metric name '1x' is not a Prometheus name"));
    assert_eq!(
        bad("mappings:\n  - match: a\n    name: x\n    labels: {k: v}\n"),
        "mapping 1: invalid label key: k"
    );
    assert!(
        bad("mappings:\n  - match: \"(\"\n    match_type: regex\n    name: x\n")
            .starts_with("mapping 1: invalid regex ( in mapping: ")
    );
    assert_eq!(
        bad("mappings:\n  - match: a\n    match_type: fuzzy\n    name: x\n"),
        "mapping 1: match_type: invalid match type \"fuzzy\""
    );
    assert_eq!(
        bad("mappings:\n  - match: a\n    name: x\n    lables: {}\n"),
        "mapping 1: unknown key 'lables'"
    );
    assert_eq!(
        bad("mappings:\n  - match: a\n    name: x\n    timer_type: summary\n"),
        "mapping 1: timer_type: \"summary\" is not supported (timers are histograms)"
    );
    assert_eq!(
        bad("mappings:\n  - match: a\n    name: x\n    histogram_options: {buckets: [2, 1]}\n"),
        "mapping 1: histogram_options.buckets: not in increasing order"
    );
    assert_eq!(
        bad("mappings:\n  - match: a\n    name: x\n    scale: big\n"),
        "mapping 1: scale: not a number"
    );
    let deep = format!("mappings: {}{}", "[".repeat(1000), "]".repeat(1000));
    assert_eq!(bad(&deep), "nested 1001 levels deep, more than 32");
    // An empty file maps nothing (every name escaped).
    let m = Mapper::from_yaml("").unwrap();
    assert_eq!(m.map("a.b", Kind::Counter).unwrap().name, "a_b");
}

#[test]
fn a_file_that_is_not_a_regular_file_is_refused() {
    let e = Mapper::from_file("/nonexistent/mapper.yaml").unwrap_err().0;
    assert!(e.starts_with("/nonexistent/mapper.yaml: "), "{e}");
    assert_eq!(
        Mapper::from_file("/").unwrap_err().0,
        "/: not a regular file"
    );
}

#[test]
fn the_built_in_response_time_in_seconds_or_milliseconds() {
    let s = prom_timer("ratelimit_server.ShouldRateLimit.response_time", false);
    assert_eq!(
        (s.name.as_str(), s.scale),
        ("ratelimit_service_response_time_seconds", 0.001)
    );
    let ms = prom_timer("ratelimit_server.ShouldRateLimit.response_time", true);
    assert_eq!(
        (ms.name.as_str(), ms.scale, ms.buckets.as_slice()),
        (
            "ratelimit_service_response_time_seconds",
            1.0,
            DEFAULT_BUCKETS
        )
    );
    assert_eq!(escape("1a.b"), "_1a_b");
}
