//! Stats settings and the local over-limit cache, end to end: a
//! Prometheus mapping file (`PROMETHEUS_MAPPER_YAML`) and a refused one,
//! the response time in milliseconds, `EXTRA_TAGS` over statsd and
//! DogStatsD, and `LOCAL_CACHE_SIZE_IN_BYTES` answering keys over their
//! limit without Redis.

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use crate::support::*;

const CONFIG: &str = r#"
domain: st
descriptors:
  - key: user
    rate_limit:
      unit: hour
      requests_per_unit: 2
  - key: trial
    shadow_mode: true
    rate_limit:
      unit: hour
      requests_per_unit: 1
  - key: team
    descriptors:
      - key: user
        rate_limit:
          unit: hour
          requests_per_unit: 5
"#;

/// A mapping file of Envoy Gateway's shape (glob rules, a regex rule for
/// two-level keys, the response time without `scale`), with names of its
/// own so that the test sees the file, not the built-in mapping.
const MAPPER: &str = r#"
mappings:
  - match: "ratelimit.service.rate_limit.*.*.total_hits"
    name: "mapped_hits"
    timer_type: "histogram"
    labels:
      domain: "$1"
      key1: "$2"
  - match: "ratelimit\\.service\\.rate_limit\\.([^\\.]*)\\.([^\\.]*)\\.([^\\.]*)(\\..*)?\\.total_hits"
    match_type: regex
    name: "mapped_hits"
    labels:
      domain: "$1"
      key1: "$2"
      key2: "$3"
  - match: "ratelimit_server.*.response_time"
    name: "mapped_response_time_ms"
    timer_type: histogram
    labels:
      grpc_method: "$1"
  - match: "ratelimit.service.config_load_success"
    action: drop
    name: dropped
"#;

/// The calls Redis counted for `command` (`INFO commandstats`).
fn calls(redis: &Redis, command: &str) -> u64 {
    let info = redis.cmd(&["INFO", "commandstats"]);
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// One sample of `/metrics`, by the whole text before its value.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mapping_file_names_the_prometheus_series() {
    not_near_hour_end();
    let redis = Redis::start();
    let dir = tempdir("mapper");
    let file = dir.join("conf.yaml");
    std::fs::write(&file, MAPPER).unwrap();
    let rls = Rls::start(
        &redis.url(),
        &[("st.yaml", CONFIG)],
        &[
            ("PROMETHEUS_MAPPER_YAML", file.to_str().unwrap()),
            ("PROMETHEUS_PATH", "/stats/prometheus"),
        ],
    );
    let mut c = rls.client().await;
    let u = unique("m");
    for _ in 0..3 {
        call(&mut c, request("st", vec![desc(&[("user", &u)])])).await;
    }
    call(
        &mut c,
        request("st", vec![desc(&[("team", "t1"), ("user", &u)])]),
    )
    .await;
    // At PROMETHEUS_PATH. The stats key is the rule's (`st.user`,
    // `st.team.user`), as the reference names it.
    let (code, text) = http_get(rls.metrics_port, "/stats/prometheus").unwrap();
    assert_eq!(code, 200, "{text}");
    assert_eq!(
        sample(&text, "mapped_hits{domain=\"st\",key1=\"user\"}"),
        Some(3.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "mapped_hits{domain=\"st\",key1=\"team\",key2=\"user\"}"
        ),
        Some(1.0),
        "{text}"
    );
    // No rule: the escaped statsd name; a dropped stat: nowhere.
    assert_eq!(
        sample(&text, "ratelimit_service_rate_limit_st_user_over_limit"),
        Some(1.0),
        "{text}"
    );
    assert!(!text.contains("config_load_success"), "{text}");
    assert!(
        !text.contains("ratelimit_service_rate_limit_total_hits"),
        "{text}"
    );
    // The response time as the file has it: in milliseconds (no scale).
    assert_eq!(
        sample(
            &text,
            "mapped_response_time_ms_count{grpc_method=\"ShouldRateLimit\"}"
        ),
        Some(4.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "mapped_response_time_ms_bucket{grpc_method=\"ShouldRateLimit\",le=\"0.005\"}"
        ),
        Some(0.0),
        "no call takes 5 microseconds: {text}"
    );
}

#[test]
fn a_malformed_mapping_file_stops_the_start() {
    let redis = Redis::start();
    let dir = tempdir("badmapper");
    let file = dir.join("conf.yaml");
    std::fs::write(
        &file,
        "mappings:\n  - match: \"ratelimit.*\"\n    labels: {k: v}\n",
    )
    .unwrap();
    let path = file.to_str().unwrap();
    let e = Rls::try_start_healthy(
        &redis.url(),
        &[("st.yaml", CONFIG)],
        &[("PROMETHEUS_MAPPER_YAML", path)],
    )
    .err()
    .expect("refused");
    assert!(
        e.contains(&format!(
            "redis-cell-rls: PROMETHEUS_MAPPER_YAML: {path}: mapping 1: invalid label key: k"
        )),
        "{e}"
    );
    let e = Rls::try_start_healthy(
        &redis.url(),
        &[("st.yaml", CONFIG)],
        &[("PROMETHEUS_MAPPER_YAML", "/nonexistent/conf.yaml")],
    )
    .err()
    .expect("refused");
    assert!(
        e.contains("redis-cell-rls: PROMETHEUS_MAPPER_YAML: /nonexistent/conf.yaml: "),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_time_in_seconds_or_milliseconds() {
    let redis = Redis::start();
    let series =
        "ratelimit_service_response_time_seconds_bucket{grpc_method=\"ShouldRateLimit\",le=";
    for (ms, env) in [
        (false, &[][..]),
        (
            true,
            &[("PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", "true")][..],
        ),
    ] {
        let rls = Rls::start(&redis.url(), &[("st.yaml", CONFIG)], env);
        let mut c = rls.client().await;
        call(
            &mut c,
            request("st", vec![desc(&[("user", &unique("rt"))])]),
        )
        .await;
        let text = rls.metrics();
        let bucket = |le: &str| sample(&text, &format!("{series}\"{le}\"}}"));
        assert_eq!(bucket("+Inf"), Some(1.0), "{text}");
        if ms {
            // The same name and buckets, in milliseconds: a call takes
            // more than 5 microseconds.
            assert_eq!(bucket("0.005"), Some(0.0), "{text}");
        } else {
            // In seconds: a call takes less than 10 s.
            assert_eq!(bucket("10"), Some(1.0), "{text}");
        }
    }
}

/// The statsd lines a service sends within `wait`.
fn statsd_lines(sock: &UdpSocket, wait: Duration, until: impl Fn(&str) -> bool) -> String {
    sock.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let start = Instant::now();
    let mut all = String::new();
    let mut buf = [0u8; 65536];
    while start.elapsed() < wait && !until(&all) {
        if let Ok(n) = sock.recv(&mut buf) {
            all.push_str(&String::from_utf8_lossy(&buf[..n]));
            all.push('\n');
        }
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extra_tags_over_statsd_and_dogstatsd() {
    not_near_hour_end();
    let redis = Redis::start();
    for dog in [false, true] {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = sock.local_addr().unwrap().port().to_string();
        let (use_statsd, use_dog) = if dog {
            ("false", "true")
        } else {
            ("true", "false")
        };
        let rls = Rls::start(
            &redis.url(),
            &[("st.yaml", CONFIG)],
            &[
                ("USE_PROMETHEUS", "false"),
                ("USE_STATSD", use_statsd),
                ("USE_DOG_STATSD", use_dog),
                ("STATSD_HOST", "127.0.0.1"),
                ("STATSD_PORT", &port),
                ("STATS_FLUSH_INTERVAL", "200ms"),
                ("EXTRA_TAGS", "version:1.2,app:edge"),
            ],
        );
        let mut c = rls.client().await;
        let u = unique("t");
        call(&mut c, request("st", vec![desc(&[("user", &u)])])).await;
        let want = if dog {
            "ratelimit.service.rate_limit.st.user.total_hits:1|c|#app:edge,version:1_2"
        } else {
            "ratelimit.service.rate_limit.st.user.total_hits.__app=edge.__version=1_2:1|c"
        };
        let timer = if dog {
            "ratelimit_server.ShouldRateLimit.response_time:"
        } else {
            "ratelimit_server.ShouldRateLimit.response_time.__app=edge.__version=1_2:"
        };
        let got = statsd_lines(&sock, Duration::from_secs(10), |t| {
            t.contains(want) && t.contains(timer)
        });
        assert!(got.contains(want), "{want} not in:\n{got}");
        assert!(got.contains(timer), "{timer} not in:\n{got}");
        if dog {
            assert!(got.contains("|ms|#app:edge,version:1_2"), "{got}");
        }
    }
    // envconfig's map syntax, refused as the reference refuses it.
    let e = Rls::try_start_healthy(
        &redis.url(),
        &[("st.yaml", CONFIG)],
        &[("EXTRA_TAGS", "version=1")],
    )
    .err()
    .expect("refused");
    assert!(
        e.contains("redis-cell-rls: EXTRA_TAGS: invalid map item: \"version=1\""),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_local_cache_answers_a_key_over_its_limit_without_redis() {
    not_near_hour_end();
    let mut redis = Redis::start();
    let rls = Rls::start(
        &redis.url(),
        &[("st.yaml", CONFIG)],
        &[("LOCAL_CACHE_SIZE_IN_BYTES", "1048576")],
    );
    let mut c = rls.client().await;
    let u = unique("lc");
    let user = || request("st", vec![desc(&[("user", &u)])]);
    // 2 an hour: OK, OK, then over (found by Redis, and cached).
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(call(&mut c, user()).await.overall_code);
    }
    assert_eq!(got, vec![OK, OK, OVER]);
    let before = calls(&redis, "fw.incr");
    assert!(before >= 3, "{before}");
    for _ in 0..4 {
        let r = call(&mut c, user()).await;
        assert_eq!(r.overall_code, OVER);
        let s = &r.statuses[0];
        assert_eq!(s.limit_remaining, 0);
        assert_eq!(
            s.current_limit.as_ref().map(|l| l.requests_per_unit),
            Some(2)
        );
        let reset = s.duration_until_reset.as_ref().unwrap().seconds;
        assert!(reset > 0 && reset <= 3600, "{reset}");
    }
    assert_eq!(calls(&redis, "fw.incr"), before, "no call reached Redis");
    // The reference's counters: the cached hits are over the limit too.
    let key = "{domain=\"st\",key1=\"user\"}";
    assert_eq!(
        rls.metric(&format!("ratelimit_service_rate_limit_total_hits{key}")),
        7
    );
    assert_eq!(
        rls.metric(&format!("ratelimit_service_rate_limit_over_limit{key}")),
        5
    );
    assert_eq!(
        rls.metric(&format!("ratelimit_service_rate_limit_within_limit{key}")),
        2
    );
    let cached = "ratelimit_service_rate_limit_st_user_over_limit_with_local_cache";
    assert_eq!(rls.metric(cached), 4, "{}", rls.metrics());
    // Redis counted what it saw: 3 hits.
    assert_eq!(redis.get_int(&format!("st_user_{u}_{}", hour())), 3);

    // A shadow rule over its limit is never cached into a refusal: OK,
    // and every call goes to Redis.
    let t = unique("sh");
    let trial = || request("st", vec![desc(&[("trial", &t)])]);
    let before = calls(&redis, "fw.incr");
    for _ in 0..3 {
        assert_eq!(call(&mut c, trial()).await.overall_code, OK);
    }
    assert_eq!(calls(&redis, "fw.incr"), before + 3);

    // With Redis gone, the cached key is still answered; another is not.
    redis.stop();
    let r = call(&mut c, user()).await;
    assert_eq!(r.overall_code, OVER);
    let e = c
        .should_rate_limit(request("st", vec![desc(&[("user", &unique("other"))])]))
        .await
        .unwrap_err();
    assert!(e.message().starts_with("redis error: "), "{}", e.message());
    assert_eq!(rls.metric(cached), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_local_cache_in_all_or_nothing_mode() {
    not_near_hour_end();
    let redis = Redis::start();
    let rls = Rls::start(
        &redis.url(),
        &[("st.yaml", CONFIG)],
        &[
            ("LOCAL_CACHE_SIZE_IN_BYTES", "1048576"),
            ("ALL_OR_NOTHING", "true"),
        ],
    );
    let mut c = rls.client().await;
    let u = unique("aon");
    let other = unique("aon-other");
    let both = || {
        request(
            "st",
            vec![
                desc(&[("user", &u)]),
                desc(&[("team", "t"), ("user", &other)]),
            ],
        )
    };
    let user = || request("st", vec![desc(&[("user", &u)])]);
    // Full after two; the third is refused by Redis and the key cached.
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(call(&mut c, user()).await.overall_code);
    }
    assert_eq!(got, vec![OK, OK, OVER]);
    let before = calls(&redis, "cl.throttleall");
    assert!(before >= 3, "{before}");
    // Refused from the cache: nothing is charged, the other descriptor
    // included (all or nothing).
    let r = call(&mut c, both()).await;
    assert_eq!(r.overall_code, OVER);
    assert_eq!(calls(&redis, "cl.throttleall"), before);
    assert_eq!(
        redis.get_int(&format!("st_team_t_user_{other}_{}", hour())),
        0
    );
    assert_eq!(redis.get_int(&format!("st_user_{u}_{}", hour())), 2);
    assert_eq!(r.statuses[1].code, OK);
    assert_eq!(r.statuses[1].limit_remaining, 5);
}
