//! The service pointed at a Redis without the module: unhealthy, a log
//! line that says what to load and where, and calls that answer an error
//! naming the module; healthy again once the server has it, and unhealthy
//! again when it comes back without it.

use std::time::Duration;

use crate::support::*;

const CONFIG: &str = r#"
domain: edge
descriptors:
  - key: user
    rate_limit:
      unit: hour
      requests_per_unit: 5
"#;

/// What the service says is wrong with the server on `port`.
fn problem(port: u16) -> String {
    let v = version();
    format!(
        "Redis at 127.0.0.1:{port} has no redis-cell module: load libredis_cell.so (redis-cell {v} or later) into that server: `loadmodule /path/to/libredis_cell.so` in its redis.conf, or `--loadmodule /path/to/libredis_cell.so` on its command line"
    )
}

/// The version the service needs: its own.
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

fn health(rls: &Rls) -> u16 {
    http_get(rls.http_port, "/healthcheck")
        .expect("/healthcheck")
        .0
}

fn json(rls: &Rls, body: &str) -> (u16, String) {
    let (code, text) = http_post_json(rls.http_port, body).expect("/json");
    let body = text
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .to_string();
    (code, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_module_the_service_says_what_to_load() {
    use tonic_health::pb::health_check_response::ServingStatus;
    let mut redis = Redis::start_without_module();
    let rls = Rls::start_unhealthy(&redis.url(), &[("edge.yaml", CONFIG)]);
    let want = problem(redis.port);

    // Unhealthy, over HTTP and gRPC.
    assert_eq!(health(&rls), 500);
    assert_eq!(
        grpc_health(&rls, "").await,
        ServingStatus::NotServing as i32
    );
    assert_eq!(
        grpc_health(&rls, "envoy.service.ratelimit.v3.RateLimitService").await,
        ServingStatus::NotServing as i32
    );
    // The log says which module to load and where.
    wait_until("the log line", Duration::from_secs(5), || {
        rls.log_text().contains(&want)
    });
    assert!(
        rls.log_text().contains(&format!(
            "level=error msg=\"redis-cell-rls cannot decide: {want}\""
        )),
        "{}",
        rls.log_text()
    );

    // Calls answer an error naming the module, not the server's raw text.
    let mut c = rls.client().await;
    let e = c
        .should_rate_limit(request("edge", vec![desc(&[("user", "u")])]))
        .await
        .unwrap_err();
    assert_eq!(e.message(), format!("redis error: {want}"));
    assert_eq!(
        rls.metric("ratelimit_service_should_rate_limit_error{err_type=\"redis_error\"}"),
        1
    );
    let (code, body) = json(
        &rls,
        r#"{"domain":"edge","descriptors":[{"entries":[{"key":"user","value":"u"}]}]}"#,
    );
    assert_eq!(code, 500);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&body).unwrap(),
        serde_json::json!({ "error": format!("redis error: {want}") })
    );
    assert!(!rls.log_text().contains("unknown command"));

    // The server comes back with the module: healthy, and calls decide.
    redis.replace(true);
    wait_until("healthy with the module", Duration::from_secs(15), || {
        health(&rls) == 200
    });
    assert_eq!(grpc_health(&rls, "").await, ServingStatus::Serving as i32);
    assert!(
        rls.log_text().contains(&format!(
            "Redis at 127.0.0.1:{} has redis-cell {}: calls are decided",
            redis.port,
            version()
        )),
        "{}",
        rls.log_text()
    );
    let u = unique("u");
    let r = call(&mut c, request("edge", vec![desc(&[("user", &u)])])).await;
    assert_eq!((r.overall_code, r.statuses[0].limit_remaining), (OK, 4));

    // It restarts without the module: the next call names the module (it
    // found the command unknown) and the check turns the service
    // unhealthy at once.
    redis.replace(false);
    let e = loop {
        match c
            .should_rate_limit(request("edge", vec![desc(&[("user", &u)])]))
            .await
        {
            // The connection is re-established by the first calls.
            Err(e)
                if e.message().contains("broken pipe")
                    || e.message().contains("connection")
                    || e.message().contains("Connection") =>
            {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            Err(e) => break e,
            Ok(r) => panic!("decided without the module: {r:?}"),
        }
    };
    assert_eq!(e.message(), format!("redis error: {want}"));
    wait_until(
        "unhealthy without the module",
        Duration::from_secs(5),
        || health(&rls) == 500,
    );
}

/// A user the server refuses `MODULE LIST` (an `@admin` command): the
/// service finds the module by its probe, or finds it missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_without_module_list_is_checked_by_the_probe() {
    let acl = [
        "ACL", "SETUSER", "rls", "on", ">pw", "~*", "&*", "+@all", "-module",
    ];
    let env = [("REDIS_AUTH", "rls:pw")];

    let redis = Redis::start();
    assert!(redis.cmd(&acl).starts_with("+ok"));
    let rls = Rls::start(&redis.url(), &[("edge.yaml", CONFIG)], &env);
    assert!(
        rls.log_text().contains(&format!(
            "Redis at 127.0.0.1:{} has redis-cell (found by the probe: MODULE LIST refused): calls are decided",
            redis.port
        )),
        "{}",
        rls.log_text()
    );
    let mut c = rls.client().await;
    let u = unique("u");
    let r = call(&mut c, request("edge", vec![desc(&[("user", &u)])])).await;
    assert_eq!((r.overall_code, r.statuses[0].limit_remaining), (OK, 4));
    // The probe writes nothing.
    assert_eq!(redis.cmd(&["EXISTS", "redis-cell-rls-probe"]), ":0\r\n");

    let bare = Redis::start_without_module();
    assert!(bare.cmd(&acl).starts_with("+ok"));
    let rls = Rls::try_start_unhealthy(&bare.url(), &[("edge.yaml", CONFIG)], &env);
    assert_eq!(health(&rls), 500);
    let mut c = rls.client().await;
    let e = c
        .should_rate_limit(request("edge", vec![desc(&[("user", "u")])]))
        .await
        .unwrap_err();
    assert_eq!(e.message(), format!("redis error: {}", problem(bare.port)));
}

/// An older redis-cell (the original 0.2.2, which `scripts/deps` builds,
/// `MODULE LIST` ver 1): unhealthy, and calls say it is too old.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_module_is_named_as_too_old() {
    let original = repo_root().join("target/deps/redis-cell-0.2.2/libredis_cell.so");
    assert!(
        original.is_file(),
        "the original redis-cell is missing at {}: run scripts/deps",
        original.display()
    );
    let redis = Redis::start_with_module(&original);
    let rls = Rls::start_unhealthy(&redis.url(), &[("edge.yaml", CONFIG)]);
    assert_eq!(health(&rls), 500);
    let want = format!(
        "Redis at 127.0.0.1:{} has an older redis-cell (MODULE LIST ver 1) than this service needs: load libredis_cell.so (redis-cell {} or later) into that server",
        redis.port,
        version()
    );
    let mut c = rls.client().await;
    let e = c
        .should_rate_limit(request("edge", vec![desc(&[("user", "u")])]))
        .await
        .unwrap_err();
    assert!(
        e.message().starts_with(&format!("redis error: {want}")),
        "{}",
        e.message()
    );
    assert!(rls.log_text().contains(&want), "{}", rls.log_text());
}
