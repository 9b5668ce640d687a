//! docs/rls.md shows the example files exactly as the end-to-end test
//! runs them.

#[test]
fn the_docs_show_the_tested_files() {
    let root = crate::support::repo_root();
    let doc = std::fs::read_to_string(root.join("docs/rls.md")).unwrap();
    let blocks: Vec<&str> = doc
        .split("```yaml\n")
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .collect();
    for file in ["rls/examples/envoy.yaml", "rls/examples/config/edge.yaml"] {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        assert!(
            blocks.contains(&text.as_str()),
            "docs/rls.md has no yaml block equal to {file}"
        );
    }
}

/// The blocks of one kind (`sh`, `yaml`, ...) of docs/rls.md.
fn blocks(kind: &str) -> Vec<String> {
    let doc = std::fs::read_to_string(crate::support::repo_root().join("docs/rls.md")).unwrap();
    doc.split(&format!("```{kind}\n"))
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .map(str::to_string)
        .collect()
}

/// The shell block that runs `command`: the request it sends (`-d '...'`)
/// and the reply it shows (the lines after the command).
fn call_in_docs(command: &str) -> (String, String) {
    let block = blocks("sh")
        .into_iter()
        .find(|b| b.contains(command))
        .unwrap_or_else(|| panic!("docs/rls.md shows no `{command}`"));
    let at = block.find(command).unwrap();
    let rest = &block[at..];
    let body = rest
        .split("-d '")
        .nth(1)
        .and_then(|b| b.split('\'').next())
        .expect("the request's -d '...'")
        .to_string();
    let reply = rest
        .lines()
        .skip_while(|l| !l.starts_with('{'))
        .collect::<Vec<_>>()
        .join("\n");
    (body, reply)
}

/// A reply's JSON with its `durationUntilReset` (the time left in the
/// hour, which moves) set aside.
fn comparable(reply: &str) -> serde_json::Value {
    let mut v: serde_json::Value =
        serde_json::from_str(reply).unwrap_or_else(|e| panic!("{e}: {reply}"));
    for s in v["statuses"].as_array_mut().expect("statuses") {
        let d = s["durationUntilReset"]
            .as_str()
            .expect("durationUntilReset");
        let secs: u64 = d.trim_end_matches('s').parse().expect("seconds");
        assert!(secs > 0 && secs <= 3600 && d.ends_with('s'), "{d}");
        s["durationUntilReset"] = "<the rest of the hour>".into();
    }
    v
}

/// The checks the page shows, made against the service with the page's
/// config: `/healthcheck`, a `/json` call and a gRPC call, whose replies
/// are those shown (the time to the hour's end aside).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_docs_show_the_checks_as_the_service_answers_them() {
    use crate::support::*;
    use envoy_types::pb::envoy::service::ratelimit::v3::{
        rate_limit_response::{Code, RateLimit},
        RateLimitRequest,
    };
    not_near_hour_end();
    let edge = std::fs::read_to_string(repo_root().join("rls/examples/config/edge.yaml")).unwrap();
    let redis = Redis::start();
    let rls = Rls::start(&redis.url(), &[("edge.yaml", &edge)], &[]);
    assert!(blocks("sh")
        .iter()
        .any(|b| b.contains("$ curl -s 127.0.0.1:8080/healthcheck\nOK\n")));
    assert_eq!(http_get(rls.http_port, "/healthcheck").unwrap().0, 200);
    assert!(http_get(rls.http_port, "/healthcheck")
        .unwrap()
        .1
        .ends_with("\r\n\r\nOK"));

    let (body, shown) = call_in_docs("curl -s -X POST 127.0.0.1:8080/json");
    let (code, text) = http_post_json(rls.http_port, &body).unwrap();
    assert_eq!(code, 200);
    let got = text.split("\r\n\r\n").nth(1).unwrap();
    assert_eq!(comparable(got), comparable(&shown));
    // Byte for byte, but for the seconds.
    let digits = |t: &str| {
        t.chars()
            .filter(|c| !c.is_ascii_digit())
            .collect::<String>()
    };
    assert_eq!(digits(got), digits(&shown));

    let (body, shown) = call_in_docs("grpcurl -plaintext");
    let req: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        req,
        serde_json::from_str::<serde_json::Value>(&call_in_docs("curl -s -X POST").0).unwrap()
    );
    let mut c = rls.client().await;
    let r = call(
        &mut c,
        RateLimitRequest {
            domain: req["domain"].as_str().unwrap().into(),
            descriptors: vec![desc(&[("user", "alice")])],
            hits_addend: 0,
        },
    )
    .await;
    // The reply in proto3 JSON, as grpcurl prints it (enum names, 64-bit
    // durations as "Ns", zero values left out).
    let code = |c: i32| Code::try_from(c).unwrap().as_str_name().to_string();
    let statuses: Vec<serde_json::Value> = r
        .statuses
        .iter()
        .map(|s| {
            let RateLimit {
                requests_per_unit,
                unit,
                ..
            } = s.current_limit.clone().unwrap();
            let unit = envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit::try_from(unit)
                .unwrap()
                .as_str_name();
            serde_json::json!({
                "code": code(s.code),
                "currentLimit": {"requestsPerUnit": requests_per_unit, "unit": unit},
                "limitRemaining": s.limit_remaining,
                "durationUntilReset": format!("{}s", s.duration_until_reset.unwrap().seconds),
            })
        })
        .collect();
    let got = serde_json::json!({"overallCode": code(r.overall_code), "statuses": statuses});
    assert_eq!(comparable(&got.to_string()), comparable(&shown));
}

/// The page quotes the service's own sentence for a Redis without the
/// module.
#[test]
fn the_docs_quote_the_missing_module_sentence() {
    let doc = std::fs::read_to_string(crate::support::repo_root().join("docs/rls.md")).unwrap();
    let sentence = rls::module::problem(&rls::module::Found::Missing, "127.0.0.1:6379").unwrap();
    assert!(
        doc.contains(&format!(
            "level=error msg=\"redis-cell-rls cannot decide: {sentence}\""
        )),
        "docs/rls.md does not quote: {sentence}"
    );
}
