//! `CONFIG_TYPE=GRPC_XDS_SOTW`: the service takes its configuration from an
//! ADS server (the test's own, `xds_server`), ACKs each version it loads,
//! NACKs one that does not load (the last good one still decides), comes
//! back after the server goes away, and loads configs in the shape Envoy
//! Gateway's translator pushes.

use std::time::{Duration, Instant};

use crate::support::*;
use crate::tls::{tls_client, tls_links_env, TlsRedis};
use crate::xds_server::{Seen, TlsFiles, XdsServer};
use envoy_types::pb::google::protobuf::{value::Kind, Struct, Value};
use rls::xds::pb::{
    RateLimitConfig, RateLimitDescriptor as PbDescriptor, RateLimitPolicy, RateLimitUnit,
};

fn policy(unit: RateLimitUnit, n: u32) -> Option<RateLimitPolicy> {
    Some(RateLimitPolicy {
        unit: unit as i32,
        requests_per_unit: n,
        unlimited: false,
        name: String::new(),
        replaces: vec![],
    })
}

/// Domain `xds`: `user` at `n` an hour.
fn user_config(n: u32, unit: RateLimitUnit) -> RateLimitConfig {
    RateLimitConfig {
        name: "xds-config".into(),
        domain: "xds".into(),
        descriptors: vec![PbDescriptor {
            key: "user".into(),
            rate_limit: policy(unit, n),
            ..Default::default()
        }],
    }
}

fn xds_env(server: &XdsServer) -> Vec<(String, String)> {
    vec![
        ("CONFIG_TYPE".into(), "GRPC_XDS_SOTW".into()),
        (
            "CONFIG_GRPC_XDS_SERVER_URL".into(),
            format!("127.0.0.1:{}", server.port),
        ),
        ("CONFIG_GRPC_XDS_NODE_ID".into(), "test-node".into()),
        (
            "CONFIG_GRPC_XDS_NODE_METADATA".into(),
            "zone=a,team=edge".into(),
        ),
        (
            "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS".into(),
            "x-token:abc,x-cluster:one".into(),
        ),
        (
            "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL".into(),
            "100ms".into(),
        ),
        ("XDS_CLIENT_BACKOFF_INITIAL_INTERVAL".into(), "100ms".into()),
        ("XDS_CLIENT_BACKOFF_MAX_INTERVAL".into(), "500ms".into()),
    ]
}

/// `xds_env`, with the service started before any configuration comes
/// (`FORCE_START_WITHOUT_INITIAL_CONFIG`).
fn force_started_xds_env(server: &XdsServer) -> Vec<(String, String)> {
    let mut env = xds_env(server);
    env.push(("FORCE_START_WITHOUT_INITIAL_CONFIG".into(), "true".into()));
    env
}

/// The xDS client's TLS: the server's CA and the name its certificate must
/// carry, and the service's own certificate when given.
fn xds_tls_env(ca: String, san: &str, cert: Option<(String, String)>) -> Vec<(String, String)> {
    let mut env = vec![
        ("CONFIG_GRPC_XDS_SERVER_USE_TLS".into(), "true".into()),
        ("CONFIG_GRPC_XDS_SERVER_TLS_CACERT".into(), ca),
        ("CONFIG_GRPC_XDS_SERVER_TLS_SAN".into(), san.into()),
    ];
    if let Some((cert, key)) = cert {
        env.push(("CONFIG_GRPC_XDS_CLIENT_TLS_CERT".into(), cert));
        env.push(("CONFIG_GRPC_XDS_CLIENT_TLS_KEY".into(), key));
    }
    env
}

fn refs(env: &[(String, String)]) -> Vec<(&str, &str)> {
    env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

/// `n` calls for `user=<u>` in domain `xds`: their codes.
/// A Redis with the module and an xDS server, away from an hour's end
/// (the configs' limits are hourly).
fn redis_and_xds() -> (Redis, XdsServer) {
    not_near_hour_end();
    (Redis::start(), XdsServer::start())
}

/// A fresh user's three calls under `user_config(2, ..)`: two allowed, the third over.
async fn allows_two(rls: &Rls, tag: &str) {
    let mut c = rls.client().await;
    let u = unique(tag);
    assert_eq!(hits(&mut c, &u, 3).await, vec![OK, OK, OVER]);
}

/// A call as the service answers it before any config is loaded.
async fn refused_without_config(c: &mut Client) {
    let e = c
        .should_rate_limit(request("xds", vec![desc(&[("user", "a")])]))
        .await
        .unwrap_err();
    assert_eq!(e.message(), "no rate limit configuration loaded");
}

async fn hits(c: &mut Client, u: &str, n: usize) -> Vec<i32> {
    let mut out = Vec::new();
    for _ in 0..n {
        let r = call(c, request("xds", vec![desc(&[("user", u)])])).await;
        out.extend(codes(&r));
    }
    out
}

/// The first request that answers a response carrying `version` and that
/// `f` accepts. Any such response's nonce will do: a version pushed while
/// the client reconnects can go out on the stream it is leaving, never
/// read, and again on its next one.
fn answer_to(server: &XdsServer, version: &str, what: &str, f: impl Fn(&Seen) -> bool) -> Seen {
    server.wait_for(what, |s| {
        f(s) && server
            .sent()
            .iter()
            .any(|r| r.version == version && r.nonce == s.req.response_nonce)
    })
}

fn acked(server: &XdsServer, version: &str) {
    answer_to(server, version, &format!("the ACK of {version}"), |s| {
        s.req.version_info == version && s.req.error_detail.is_none()
    });
}

/// With TLS on every link, as Envoy Gateway runs the service: the xDS
/// client's mutual TLS, the gRPC listener taking Envoy's client
/// certificate only, and Redis with the service's client certificate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configs_pushed_over_xds_decide_and_a_bad_one_is_nacked() {
    not_near_hour_end();
    let certs = crate::tls::certificates();
    let p = |f: &str| crate::tls::path(&certs, f);
    let redis = TlsRedis::start(&certs);
    let mut server = XdsServer::start_with(Some(TlsFiles {
        cert: certs.join("xds.crt"),
        key: certs.join("xds.key"),
        client_ca: certs.join("ca.crt"),
    }));
    server.push("v1", &[user_config(2, RateLimitUnit::Hour)]);
    let mut env = xds_env(&server);
    let own = (p("ratelimit.crt"), p("ratelimit.key"));
    env.extend(xds_tls_env(p("ca.crt"), "xds.test.internal", Some(own)));
    env.extend(tls_links_env(&certs));
    let rls = Rls::start(&redis.url(), &[], &refs(&env));

    // The first request: who the service is, what it asks for, from no
    // version, with the headers it was told to send.
    let first = server.wait_for("the first request", |_| true);
    assert_eq!(first.stream, 0);
    let node = first.req.node.clone().expect("a node");
    assert_eq!(node.id, "test-node");
    let md = node.metadata.expect("node metadata").fields;
    let text = |k: &str| match md.get(k).and_then(|v| v.kind.clone()) {
        Some(Kind::StringValue(s)) => s,
        other => panic!("metadata {k}: {other:?}"),
    };
    assert_eq!((text("zone"), text("team")), ("a".into(), "edge".into()));
    assert_eq!(
        first.req.type_url,
        "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig"
    );
    assert_eq!(first.req.version_info, "");
    assert_eq!(first.req.response_nonce, "");
    for h in [("x-token", "abc"), ("x-cluster", "one")] {
        assert!(
            first
                .headers
                .iter()
                .any(|(k, v)| (k.as_str(), v.as_str()) == h),
            "{h:?} not in {:?}",
            first.headers
        );
    }
    acked(&server, "v1");

    let mut c = tls_client(rls.grpc_port, &p("ca.crt"), Some((&certs, "envoy")))
        .await
        .expect("a client over TLS");
    let u1 = unique("x1");
    assert_eq!(hits(&mut c, &u1, 3).await, vec![OK, OK, OVER]);
    let r = call(&mut c, request("xds", vec![desc(&[("user", &u1)])])).await;
    assert_eq!(limit_of(&r), Some(2));

    // A changed config: applied live, ACKed.
    server.push("v2", &[user_config(4, RateLimitUnit::Hour)]);
    acked(&server, "v2");
    let u2 = unique("x2");
    assert_eq!(hits(&mut c, &u2, 5).await, vec![OK, OK, OK, OK, OVER]);
    assert_eq!(rls.metric("ratelimit_service_config_load_success"), 2);

    // An invalid one: NACKed with the loader's text, v2 still decides.
    let mut bad = user_config(3, RateLimitUnit::Hour);
    bad.descriptors[0].rate_limit.as_mut().unwrap().unit = RateLimitUnit::Unknown as i32;
    server.push("v3", &[bad]);
    let nack = answer_to(&server, "v3", "the NACK of v3", |_| true);
    assert_eq!(
        nack.req.version_info, "v2",
        "a NACK names the last good version"
    );
    assert_eq!(
        nack.req.error_detail.expect("error_detail").message,
        "xds-config: invalid rate limit unit 'UNKNOWN'"
    );
    wait_until("config_load_error 1", Duration::from_secs(5), || {
        rls.metric("ratelimit_service_config_load_error") == 1
    });
    let u3 = unique("x3");
    assert_eq!(hits(&mut c, &u3, 5).await, vec![OK, OK, OK, OK, OVER]);
    // A resource that is not a RateLimitConfig: NACKed too.
    server.push_any(
        "v3b",
        vec![envoy_types::pb::google::protobuf::Any {
            type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster".into(),
            value: vec![],
        }],
    );
    let nack = answer_to(&server, "v3b", "the NACK of v3b", |_| true);
    assert_eq!(nack.req.version_info, "v2");
    assert!(nack
        .req
        .error_detail
        .expect("error_detail")
        .message
        .starts_with("mismatched message type"));

    // The server goes away: the last good config still decides.
    server.stop();
    wait_until(
        "the lost stream in the log",
        Duration::from_secs(10),
        || {
            rls.log_text()
                .contains("Failed to receive configuration from xDS Management Server")
        },
    );
    let u4 = unique("x4");
    assert_eq!(hits(&mut c, &u4, 5).await, vec![OK, OK, OK, OK, OVER]);
    // Connections refused meanwhile are retried.
    wait_until(
        "a refused connection in the log",
        Duration::from_secs(10),
        || {
            rls.log_text()
                .contains("Error initializing gRPC connection to xDS Management Server")
        },
    );

    // It comes back with a new version: the service reconnects, starting
    // from the last version it accepted, and takes the new one.
    server.push("v4", &[user_config(1, RateLimitUnit::Hour)]);
    server.restart();
    let again = server.wait_for("a request on a new stream", |s| s.stream >= 1);
    assert_eq!(again.req.version_info, "v2");
    assert_eq!(again.req.node.expect("node").id, "test-node");
    acked(&server, "v4");
    let u5 = unique("x5");
    assert_eq!(hits(&mut c, &u5, 2).await, vec![OK, OVER]);
    assert!(!rls.log_text().contains("panicked"), "{}", rls.log_text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_force_start_the_service_waits_for_its_first_config() {
    let (redis, server) = redis_and_xds();
    let env = xds_env(&server);
    let url = redis.url();
    let started = std::thread::spawn(move || {
        let rls = Rls::start(&url, &[], &refs(&env));
        (rls, Instant::now())
    });
    server.wait_for("the first request", |_| true);
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        !started.is_finished(),
        "the service took calls before any configuration came"
    );
    let pushed = Instant::now();
    server.push("v1", &[user_config(2, RateLimitUnit::Hour)]);
    let (rls, ready) = started.join().unwrap();
    assert!(ready >= pushed);
    allows_two(&rls, "w").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_start_and_health_with_at_least_one_config() {
    let (redis, server) = redis_and_xds();
    let mut env = force_started_xds_env(&server);
    env.push((
        "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED".into(),
        "true".into(),
    ));
    // Starts with no config at all, unhealthy, calls refused.
    let rls = Rls::try_start_unhealthy(&redis.url(), &[], &refs(&env));
    assert_eq!(http_get(rls.http_port, "/healthcheck").unwrap().0, 500);
    let mut c = rls.client().await;
    refused_without_config(&mut c).await;
    let health = |want: u16| {
        wait_until(
            &format!("/healthcheck {want}"),
            Duration::from_secs(10),
            || http_get(rls.http_port, "/healthcheck").unwrap().0 == want,
        )
    };
    // A snapshot with no config: loaded and ACKed, still unhealthy.
    server.push("empty", &[]);
    acked(&server, "empty");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(http_get(rls.http_port, "/healthcheck").unwrap().0, 500);
    server.push("v1", &[user_config(2, RateLimitUnit::Hour)]);
    acked(&server, "v1");
    health(200);
    let u = unique("f");
    assert_eq!(hits(&mut c, &u, 3).await, vec![OK, OK, OVER]);
    // Every config removed: unhealthy again, as the reference.
    server.push("empty2", &[]);
    acked(&server, "empty2");
    health(500);
}

fn s(v: &str) -> String {
    v.to_string()
}

/// A descriptor as Envoy Gateway's translator writes it: every field set.
fn eg(
    key: &str,
    value: &str,
    rl: Option<RateLimitPolicy>,
    children: Vec<PbDescriptor>,
) -> PbDescriptor {
    PbDescriptor {
        key: s(key),
        value: s(value),
        rate_limit: rl,
        descriptors: children,
        shadow_mode: false,
        detailed_metric: false,
        quota_mode: false,
        metadata: None,
    }
}

/// Envoy Gateway's shape: a listener's domain with per-route rules (header
/// value matches, a distinct header, a masked remote address with a
/// distinct remote address, a rule for all traffic), and shared rules in
/// domains of their own; units up to YEAR.
fn gateway_configs() -> Vec<RateLimitConfig> {
    let mut shadow = eg(
        "rule-1-match-0",
        "rule-1-match-0",
        policy(RateLimitUnit::Second, 1),
        vec![],
    );
    shadow.shadow_mode = true;
    shadow.detailed_metric = true;
    let mut with_md = eg("rule-0-match-0", "", policy(RateLimitUnit::Year, 1), vec![]);
    with_md.metadata = Some(Struct {
        fields: [(
            s("policy"),
            Value {
                kind: Some(Kind::StringValue(s("default/eg-policy"))),
            },
        )]
        .into_iter()
        .collect(),
    });
    vec![
        RateLimitConfig {
            name: s("default/eg/http"),
            domain: s("default/eg/http"),
            descriptors: vec![
                eg(
                    "httproute/default/backend/rule/0/match/0",
                    "httproute/default/backend/rule/0/match/0",
                    None,
                    vec![
                        eg(
                            "rule-0-match-0",
                            "rule-0-match-0",
                            policy(RateLimitUnit::Month, 5),
                            vec![],
                        ),
                        shadow,
                    ],
                ),
                eg(
                    "httproute/default/users/rule/0/match/0",
                    "httproute/default/users/rule/0/match/0",
                    None,
                    vec![with_md],
                ),
                eg(
                    "httproute/default/ips/rule/0/match/0",
                    "httproute/default/ips/rule/0/match/0",
                    None,
                    vec![eg(
                        "masked_remote_address",
                        "0.0.0.0/0",
                        None,
                        vec![eg(
                            "remote_address",
                            "",
                            policy(RateLimitUnit::Hour, 2),
                            vec![],
                        )],
                    )],
                ),
                eg(
                    "httproute/default/all/rule/0/match/-1",
                    "httproute/default/all/rule/0/match/-1",
                    None,
                    vec![eg(
                        "rule-0-match--1",
                        "rule-0-match--1",
                        policy(RateLimitUnit::Day, 3),
                        vec![],
                    )],
                ),
            ],
        },
        RateLimitConfig {
            name: s("default/shared-policy"),
            domain: s("default/shared-policy"),
            descriptors: vec![eg(
                "default/shared-policy/rule/0",
                "default/shared-policy/rule/0",
                None,
                vec![eg(
                    "rule-0-match-0",
                    "rule-0-match-0",
                    policy(RateLimitUnit::Week, 2),
                    vec![],
                )],
            )],
        },
        RateLimitConfig {
            name: s("default/eg/https"),
            domain: s("default/eg/https"),
            descriptors: vec![eg(
                "httproute/default/secure/rule/0/match/0",
                "httproute/default/secure/rule/0/match/0",
                None,
                vec![eg(
                    "rule-0-match-0",
                    "rule-0-match-0",
                    policy(RateLimitUnit::Hour, 1),
                    vec![],
                )],
            )],
        },
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_gateways_configs_load_and_decide() {
    let (redis, server) = redis_and_xds();
    server.push("eg-1", &gateway_configs());
    let env = xds_env(&server);
    let rls = Rls::start(&redis.url(), &[], &refs(&env));
    acked(&server, "eg-1");
    let mut c = rls.client().await;
    let route = |r: &str| s(&format!("httproute/default/{r}/rule/0/match/0"));
    let decide = |domain: &'static str, entries: Vec<(String, String)>| {
        request(
            domain,
            vec![desc(
                &entries
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect::<Vec<_>>(),
            )],
        )
    };
    let backend = route("backend");
    let m = |k: &str| (s(k), s(k));
    // Per-route header match, a month's 5.
    let r = call(
        &mut c,
        decide("default/eg/http", vec![m(&backend), m("rule-0-match-0")]),
    )
    .await;
    assert_eq!(codes(&r), vec![OK]);
    assert_eq!(limit_of(&r), Some(5));
    assert_eq!(
        r.statuses[0].current_limit.as_ref().unwrap().unit,
        5,
        "MONTH"
    );
    // The shadow rule: over its limit, still OK.
    let shadow = decide("default/eg/http", vec![m(&backend), m("rule-1-match-0")]);
    let mut got = Vec::new();
    for _ in 0..3 {
        got.extend(codes(&call(&mut c, shadow.clone()).await));
    }
    assert_eq!(got, vec![OK, OK, OK]);
    // A distinct header (no value in the config): each value its own year's 1.
    let users = route("users");
    let who = unique("alice");
    let alice = decide(
        "default/eg/http",
        vec![m(&users), (s("rule-0-match-0"), who.clone())],
    );
    assert_eq!(codes(&call(&mut c, alice.clone()).await), vec![OK]);
    assert_eq!(codes(&call(&mut c, alice).await), vec![OVER]);
    let bob = decide(
        "default/eg/http",
        vec![m(&users), (s("rule-0-match-0"), unique("bob"))],
    );
    let r = call(&mut c, bob).await;
    assert_eq!(
        (
            codes(&r),
            r.statuses[0].current_limit.as_ref().unwrap().unit
        ),
        (vec![OK], 6)
    );
    // masked_remote_address then a distinct remote_address: 2 an hour each.
    let ips = route("ips");
    let ip = decide(
        "default/eg/http",
        vec![
            m(&ips),
            (s("masked_remote_address"), s("0.0.0.0/0")),
            (s("remote_address"), unique("10.0.0.1")),
        ],
    );
    let mut got = Vec::new();
    for _ in 0..3 {
        got.extend(codes(&call(&mut c, ip.clone()).await));
    }
    assert_eq!(got, vec![OK, OK, OVER]);
    // The shared rule's own domain, a week's 2.
    let shared = decide(
        "default/shared-policy",
        vec![m("default/shared-policy/rule/0"), m("rule-0-match-0")],
    );
    let r = call(&mut c, shared).await;
    assert_eq!((codes(&r), limit_of(&r)), (vec![OK], Some(2)));
    assert_eq!(
        r.statuses[0].current_limit.as_ref().unwrap().unit,
        7,
        "WEEK"
    );
    // The other listener's domain.
    let secure = decide(
        "default/eg/https",
        vec![m(&route("secure")), m("rule-0-match-0")],
    );
    assert_eq!(limit_of(&call(&mut c, secure).await), Some(1));
    // Every domain is in the service's config dump.
    let (_, dump) = http_get(rls.debug_port, "/rlconfig").unwrap();
    for d in [
        "default/eg/http",
        "default/shared-policy",
        "default/eg/https",
    ] {
        assert!(dump.contains(d), "{d} not in {dump}");
    }
}

/// A CA, the xDS server's certificate (for `xds.test.internal`) and the
/// service's client certificate (its key in SEC1 form, as `openssl ecparam`
/// writes it), made now.
fn certificates() -> std::path::PathBuf {
    let d = tempdir("xds-tls");
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let mut ca = vec!["req", "-x509", "-days", "1", "-subj", "/CN=xds-test-ca"];
    ca.extend_from_slice(&ec);
    ca.extend_from_slice(&["-keyout", "ca.key", "-out", "ca.crt"]);
    openssl(&d, &ca);
    std::fs::write(
        d.join("server.ext"),
        "subjectAltName=DNS:xds.test.internal\n",
    )
    .unwrap();
    let mut csr = vec!["req", "-subj", "/CN=xds-server"];
    csr.extend_from_slice(&ec);
    csr.extend_from_slice(&["-keyout", "server.key", "-out", "server.csr"]);
    openssl(&d, &csr);
    sign_with_ca(&d, "server.csr", "server.ext", "server.crt");
    openssl(
        &d,
        &[
            "ecparam",
            "-name",
            "prime256v1",
            "-genkey",
            "-noout",
            "-out",
            "client.key",
        ],
    );
    openssl(
        &d,
        &[
            "req",
            "-new",
            "-key",
            "client.key",
            "-subj",
            "/CN=ratelimit",
            "-out",
            "client.csr",
        ],
    );
    std::fs::write(d.join("client.ext"), "extendedKeyUsage=clientAuth\n").unwrap();
    sign_with_ca(&d, "client.csr", "client.ext", "client.crt");
    assert!(std::fs::read_to_string(d.join("client.key"))
        .unwrap()
        .contains("BEGIN EC PRIVATE KEY"));
    d
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_xds_link_is_mutual_tls() {
    not_near_hour_end();
    let certs = certificates();
    let p = |f: &str| certs.join(f).to_string_lossy().into_owned();
    let redis = Redis::start();
    let server = XdsServer::start_with(Some(TlsFiles {
        cert: certs.join("server.crt"),
        key: certs.join("server.key"),
        client_ca: certs.join("ca.crt"),
    }));
    server.push("tls-1", &[user_config(2, RateLimitUnit::Hour)]);
    let tls_env = |san: &str, with_cert: bool| {
        let mut env = force_started_xds_env(&server);
        let cert = with_cert.then(|| (p("client.crt"), p("client.key")));
        env.extend(xds_tls_env(p("ca.crt"), san, cert));
        env
    };

    // A server whose certificate does not name the SAN asked for: refused
    // by the service, no request reaches it.
    let env = tls_env("other.test.internal", true);
    let wrong = Rls::start(&redis.url(), &[], &refs(&env));
    wait_until(
        "the refused server in the log",
        Duration::from_secs(10),
        || {
            wrong
                .log_text()
                .contains("Error initializing gRPC connection to xDS Management Server")
        },
    );
    drop(wrong);
    // Without a client certificate: the server refuses the service.
    let before = server.refused.load(std::sync::atomic::Ordering::SeqCst);
    let env = tls_env("xds.test.internal", false);
    let anonymous = Rls::start(&redis.url(), &[], &refs(&env));
    wait_until("a refused handshake", Duration::from_secs(10), || {
        server.refused.load(std::sync::atomic::Ordering::SeqCst) > before
    });
    wait_until(
        "the lost stream in the log",
        Duration::from_secs(10),
        || {
            let log = anonymous.log_text();
            log.contains("Error initializing gRPC connection to xDS Management Server")
                || log.contains("Failed to receive configuration from xDS Management Server")
        },
    );
    drop(anonymous);
    assert!(server.seen().is_empty(), "{:?}", server.seen());

    // Both certificates right: the config comes over TLS and decides.
    let env = tls_env("xds.test.internal", true);
    let rls = Rls::start(&redis.url(), &[], &refs(&env));
    acked(&server, "tls-1");
    allows_two(&rls, "t").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_past_the_message_size_is_not_taken() {
    let (redis, server) = redis_and_xds();
    let mut big = user_config(2, RateLimitUnit::Hour);
    for i in 0..100 {
        big.descriptors.push(PbDescriptor {
            key: format!("padding-key-number-{i}"),
            rate_limit: policy(RateLimitUnit::Hour, 9),
            ..Default::default()
        });
    }
    server.push("big", &[big]);
    let mut env = force_started_xds_env(&server);
    env.push(("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES".into(), "2000".into()));
    let rls = Rls::start(&redis.url(), &[], &refs(&env));
    wait_until(
        "the refused response in the log",
        Duration::from_secs(10),
        || rls.log_text().contains("message length too large"),
    );
    let mut c = rls.client().await;
    refused_without_config(&mut c).await;
    assert!(!server.seen().iter().any(|s| s.req.version_info == "big"));
    // A response within the size, on the next stream: taken.
    server.push("small", &[user_config(2, RateLimitUnit::Hour)]);
    acked(&server, "small");
    let u = unique("m");
    assert_eq!(hits(&mut c, &u, 3).await, vec![OK, OK, OVER]);
}
