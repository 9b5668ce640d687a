//! End to end as Envoy Gateway deploys it: the service takes an Envoy
//! Gateway-shaped config over xDS, and a real Envoy asks it with the rate
//! limit actions Envoy Gateway's translator writes for the same routes
//! (`generic_key` for the route, `header_value_match`, `request_headers`
//! for a distinct header, `masked_remote_address` then `remote_address`,
//! `hits_addend` for a request cost), through `RateLimitPerRoute`.

use std::time::Duration;

use crate::envoy::upstream;
use crate::support::*;
use crate::xds_server::XdsServer;
use rls::xds::pb::{RateLimitConfig, RateLimitDescriptor, RateLimitPolicy, RateLimitUnit};

fn rule(
    key: &str,
    value: &str,
    per_hour: Option<u32>,
    children: Vec<RateLimitDescriptor>,
) -> RateLimitDescriptor {
    RateLimitDescriptor {
        key: key.into(),
        value: value.into(),
        rate_limit: per_hour.map(|n| RateLimitPolicy {
            unit: RateLimitUnit::Hour as i32,
            requests_per_unit: n,
            unlimited: false,
            name: String::new(),
            replaces: vec![],
        }),
        descriptors: children,
        shadow_mode: false,
        detailed_metric: false,
        quota_mode: false,
        metadata: None,
    }
}

/// The listener's domain, as the translator builds it for four routes.
fn listener_config() -> RateLimitConfig {
    let route = |name: &str, child: RateLimitDescriptor| rule(name, name, None, vec![child]);
    RateLimitConfig {
        name: "first-listener".into(),
        domain: "first-listener".into(),
        descriptors: vec![
            route(
                "first-route",
                rule("rule-0-match-0", "rule-0-match-0", Some(2), vec![]),
            ),
            route("second-route", rule("rule-0-match-0", "", Some(1), vec![])),
            route(
                "third-route",
                rule(
                    "masked_remote_address",
                    "0.0.0.0/0",
                    None,
                    vec![rule("remote_address", "", Some(2), vec![])],
                ),
            ),
            route(
                "req-cost",
                rule("rule-0-match--1", "rule-0-match--1", Some(7), vec![]),
            ),
        ],
    }
}

const ENVOY: &str = r#"
admin:
  address: { socket_address: { address: 127.0.0.1, port_value: ADMIN } }
static_resources:
  listeners:
    - name: first-listener
      address: { socket_address: { address: 127.0.0.1, port_value: LISTEN } }
      filter_chains:
        - filters:
            - name: envoy.filters.network.http_connection_manager
              typed_config:
                "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
                stat_prefix: http-10080
                use_remote_address: true
                http_filters:
                  - name: envoy.filters.http.ratelimit
                    typed_config:
                      "@type": type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit
                      domain: first-listener
                      timeout: 2s
                      failure_mode_deny: true
                      disable_x_envoy_ratelimited_header: true
                      enable_x_ratelimit_headers: DRAFT_VERSION_03
                      rate_limit_service:
                        transport_api_version: V3
                        grpc_service: { envoy_grpc: { cluster_name: ratelimit_cluster } }
                  - name: envoy.filters.http.router
                    typed_config:
                      "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
                route_config:
                  name: first-listener
                  virtual_hosts:
                    - name: first-listener/*
                      domains: ["*"]
                      routes:
ROUTES
  clusters:
    - name: app
      type: STATIC
      connect_timeout: 1s
      load_assignment:
        cluster_name: app
        endpoints:
          - lb_endpoints:
              - endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: APP } } }
"#;

/// The routes, each as Envoy Gateway writes a route with a rate limit: a
/// `generic_key` naming the route, then the rule's own actions (YAML at the
/// actions' indentation; a `hits_addend` two spaces less).
const ROUTES: &[(&str, &str, &str)] = &[
    (
        "first-route",
        "/header",
        r#"                                    - header_value_match:
                                        descriptor_key: rule-0-match-0
                                        descriptor_value: rule-0-match-0
                                        expect_match: true
                                        headers: [{ name: x-user-id, string_match: { exact: one } }]"#,
    ),
    (
        "second-route",
        "/distinct",
        r#"                                    - request_headers: { header_name: x-user-id, descriptor_key: rule-0-match-0 }"#,
    ),
    (
        "third-route",
        "/address",
        r#"                                    - masked_remote_address: { v4_prefix_mask_len: 0, v6_prefix_mask_len: 0 }
                                    - remote_address: {}"#,
    ),
    (
        "req-cost",
        "/cost",
        r#"                                    - generic_key: { descriptor_key: rule-0-match--1, descriptor_value: rule-0-match--1 }
                                  hits_addend: { number: 3 }"#,
    ),
];

fn routes() -> String {
    ROUTES
        .iter()
        .map(|(name, path, actions)| {
            format!(
                r#"                        - name: {name}
                          match: {{ path: {path} }}
                          route: {{ cluster: app }}
                          typed_per_filter_config:
                            envoy.filters.http.ratelimit:
                              "@type": type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimitPerRoute
                              domain: first-listener
                              rate_limits:
                                - actions:
                                    - generic_key: {{ descriptor_key: {name}, descriptor_value: {name} }}
{actions}
"#
            )
        })
        .collect()
}

struct Envoy {
    child: std::process::Child,
    port: u16,
}

impl Drop for Envoy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_envoy(rls_port: u16) -> Envoy {
    let app = upstream();
    let (port, admin) = (free_port(), free_port());
    let cfg = format!(
        "{ENVOY}{}",
        crate::envoy::h2_cluster("ratelimit_cluster", rls_port)
    )
    .replace("ROUTES\n", &routes())
    .replace("port_value: ADMIN", &format!("port_value: {admin}"))
    .replace("port_value: LISTEN", &format!("port_value: {port}"))
    .replace("port_value: APP", &format!("port_value: {app}"));
    let dir = tempdir("xds-envoy");
    std::fs::write(dir.join("envoy.yaml"), cfg).unwrap();
    let log = dir.join("envoy.log");
    let child = crate::envoy::spawn_envoy(&dir.join("envoy.yaml"), &log);
    let mut e = Envoy { child, port };
    let start = std::time::Instant::now();
    loop {
        if let Ok(Some(status)) = e.child.try_wait() {
            panic!(
                "envoy exited with {status}: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        if http_get(admin, "/ready")
            .map(|(c, _)| c == 200)
            .unwrap_or(false)
        {
            return e;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "envoy not ready: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The status and the `x-ratelimit-remaining` of one request.
fn get(envoy: &Envoy, path: &str, user: Option<&str>) -> (u16, Option<String>) {
    let header = user
        .map(|u| format!("x-user-id: {u}\r\n"))
        .unwrap_or_default();
    let (code, text) = http_request(
        envoy.port,
        &format!("GET {path} HTTP/1.1\r\nHost: app\r\n{header}Connection: close\r\n\r\n"),
    )
    .expect("a request through envoy");
    let remaining = text
        .split("\r\n\r\n")
        .next()
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("x-ratelimit-remaining"))
        .map(|(_, v)| v.trim().to_string());
    (code, remaining)
}

fn statuses(envoy: &Envoy, path: &str, user: Option<&str>, n: usize) -> Vec<u16> {
    (0..n).map(|_| get(envoy, path, user).0).collect()
}

#[test]
fn envoy_gateways_routes_are_decided_by_its_xds_config() {
    not_near_hour_end();
    let redis = Redis::start();
    let server = XdsServer::start();
    server.push("eg-1", &[listener_config()]);
    let env = [
        ("CONFIG_TYPE", "GRPC_XDS_SOTW".to_string()),
        (
            "CONFIG_GRPC_XDS_SERVER_URL",
            format!("127.0.0.1:{}", server.port),
        ),
        ("CONFIG_GRPC_XDS_NODE_ID", "envoy-ratelimit".to_string()),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let rls = Rls::start(&redis.url(), &[], &env);
    let envoy = start_envoy(rls.grpc_port);

    // header_value_match: the matching value shares 2 an hour; another
    // value makes no descriptor, so nothing limits it.
    assert_eq!(
        statuses(&envoy, "/header", Some("one"), 3),
        vec![200, 200, 429]
    );
    assert_eq!(
        statuses(&envoy, "/header", Some("two"), 3),
        vec![200, 200, 200]
    );
    // request_headers (distinct): 1 an hour for each value.
    assert_eq!(
        statuses(&envoy, "/distinct", Some("alice"), 2),
        vec![200, 429]
    );
    assert_eq!(statuses(&envoy, "/distinct", Some("bob"), 1), vec![200]);
    // masked_remote_address 0.0.0.0/0, then the client's own address.
    assert_eq!(statuses(&envoy, "/address", None, 3), vec![200, 200, 429]);
    // hits_addend 3 against 7 an hour: 3, 6, then 9 is over.
    assert_eq!(get(&envoy, "/cost", None), (200, Some("4".into())));
    assert_eq!(get(&envoy, "/cost", None), (200, Some("1".into())));
    assert_eq!(get(&envoy, "/cost", None).0, 429);
    // The counters are the reference's keys.
    let key = format!(
        "first-listener_req-cost_req-cost_rule-0-match--1_rule-0-match--1_{}",
        hour()
    );
    assert_eq!(redis.get_int(&key), 9);
}
