//! The reference's service settings: `GRPC_UDS`, `RESPONSE_DYNAMIC_METADATA`,
//! `REDIS_HEALTH_CHECK_ACTIVE_CONNECTION`, `REDIS_STARTUP_*`, and the gRPC
//! health service following `HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::RateLimitOverride;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::google::protobuf::{value::Kind, Struct, UInt64Value};
use hyper_util::rt::TokioIo;
use tonic::transport::{Channel, Endpoint, Uri};
use tonic_health::pb::health_check_response::ServingStatus;

use crate::support::*;

const CONFIG: &str =
    "domain: s\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 2}\n";

/// CONFIG with the reference's `metadata` on its rule.
const WITH_METADATA: &str = "domain: s\ndescriptors:\n  - key: user\n    metadata: {team: edge, labels: {tier: 1}}\n    rate_limit: {unit: hour, requests_per_unit: 2}\n";

const SERVING: i32 = ServingStatus::Serving as i32;
const NOT_SERVING: i32 = ServingStatus::NotServing as i32;

/// A gRPC channel over the Unix socket `path`, through TLS when `ca` is
/// given (the server's certificate verified against it under `localhost`).
async fn uds_channel(path: &Path, ca: Option<&Path>) -> Result<Channel, String> {
    let path = path.to_path_buf();
    let connector = ca.map(|ca| {
        let mut b =
            openssl::ssl::SslConnector::builder(openssl::ssl::SslMethod::tls_client()).unwrap();
        b.set_ca_file(ca).unwrap();
        b.set_alpn_protos(b"\x02h2").unwrap();
        b.build()
    });
    let connect = tower::service_fn(move |_: Uri| {
        let (path, connector) = (path.clone(), connector.clone());
        async move {
            let unix = tokio::net::UnixStream::connect(&path).await?;
            let Some(connector) = connector else {
                return Ok::<_, std::io::Error>(TokioIo::new(Box::new(unix) as Box<dyn Io>));
            };
            let ssl = connector
                .configure()
                .and_then(|c| c.into_ssl("localhost"))
                .map_err(std::io::Error::other)?;
            let mut s = tokio_openssl::SslStream::new(ssl, unix).map_err(std::io::Error::other)?;
            std::pin::Pin::new(&mut s)
                .connect()
                .await
                .map_err(std::io::Error::other)?;
            Ok(TokioIo::new(Box::new(s) as Box<dyn Io>))
        }
    });
    // The authority is not used to connect: the socket is.
    Endpoint::from_static("http://localhost")
        .timeout(Duration::from_secs(5))
        .connect_with_connector(connect)
        .await
        .map_err(|e| format!("{e:?}"))
}

trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> Io for T {}

/// A certificate for `localhost`, self-signed (`rls.crt`, `rls.key` in a
/// new directory).
fn localhost_certificate() -> PathBuf {
    let d = tempdir("uds-cert");
    openssl(
        &d,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost",
            "-keyout",
            "rls.key",
            "-out",
            "rls.crt",
        ],
    );
    d
}

/// Sends SIGTERM to the service and waits for it to exit.
fn terminate(rls: &Rls) {
    // SAFETY: kill only sends a signal to the process the test started.
    assert_eq!(
        unsafe { libc::kill(rls.pid() as libc::pid_t, libc::SIGTERM) },
        0
    );
    wait_until("the service to exit", Duration::from_secs(15), || {
        !Path::new(&format!("/proc/{}", rls.pid())).exists()
            || std::fs::read_to_string(format!("/proc/{}/stat", rls.pid()))
                .map(|s| s.contains(") Z "))
                .unwrap_or(true)
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_over_a_unix_socket() {
    not_near_hour_end();
    let redis = Redis::start();
    let dir = tempdir("uds");
    let sock = dir.join("rls.sock");
    // A socket a service killed before left behind: nothing accepts on it.
    drop(std::os::unix::net::UnixListener::bind(&sock).unwrap());
    assert!(sock.exists());
    let sock_s = sock.to_str().unwrap();
    let rls = Rls::start(&redis.url(), &[("s.yaml", CONFIG)], &[("GRPC_UDS", sock_s)]);
    assert!(
        !listening(rls.grpc_port),
        "GRPC_UDS replaces GRPC_HOST:GRPC_PORT"
    );
    assert!(rls.log_text().contains(&format!("grpc {sock_s}")));

    let channel = uds_channel(&sock, None).await.unwrap();
    let mut c = RateLimitServiceClient::new(channel.clone());
    let u = unique("u");
    let got = overall_codes(&mut c, &request("s", vec![desc(&[("user", &u)])]), 3).await;
    assert_eq!(got, vec![OK, OK, OVER]);
    assert_eq!(health_over(channel, "").await, SERVING);

    // A second service on a socket that one serves: refused, the socket kept.
    let second =
        Rls::try_start_healthy(&redis.url(), &[("s.yaml", CONFIG)], &[("GRPC_UDS", sock_s)]);
    let text = second.err().expect("a second service on a live socket");
    assert!(
        text.contains(&format!(
            "GRPC_UDS: {sock_s}: a server already listens on this socket"
        )),
        "{text}"
    );
    let channel = uds_channel(&sock, None).await.unwrap();
    assert_eq!(health_over(channel, "").await, SERVING);

    // A clean stop removes the socket, as the reference's listener does.
    terminate(&rls);
    assert!(!sock.exists(), "the socket is removed at a clean stop");

    // A file that is not a socket is never removed.
    std::fs::write(&sock, "not a socket").unwrap();
    let text = Rls::try_start_healthy(&redis.url(), &[("s.yaml", CONFIG)], &[("GRPC_UDS", sock_s)])
        .err()
        .expect("a file in the way");
    assert!(
        text.contains(&format!("GRPC_UDS: {sock_s} exists and is not a socket")),
        "{text}"
    );
    assert_eq!(std::fs::read_to_string(&sock).unwrap(), "not a socket");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_and_the_connection_cap_apply_on_a_unix_socket() {
    not_near_hour_end();
    let redis = Redis::start();
    let certs = localhost_certificate();
    let sock = tempdir("uds-tls").join("rls.sock");
    let (cert, key, ca) = (
        certs.join("rls.crt"),
        certs.join("rls.key"),
        certs.join("rls.crt"),
    );
    let _rls = Rls::start(
        &redis.url(),
        &[("s.yaml", CONFIG)],
        &[
            ("GRPC_UDS", sock.to_str().unwrap()),
            ("GRPC_SERVER_USE_TLS", "true"),
            ("GRPC_SERVER_TLS_CERT", cert.to_str().unwrap()),
            ("GRPC_SERVER_TLS_KEY", key.to_str().unwrap()),
            ("GRPC_MAX_CONNECTIONS", "1"),
        ],
    );
    // Plain HTTP/2 on the socket is not answered.
    let plain = uds_channel(&sock, None).await;
    let refused = match plain {
        Err(_) => true,
        Ok(ch) => RateLimitServiceClient::new(ch)
            .should_rate_limit(request("s", vec![desc(&[("user", "p")])]))
            .await
            .is_err(),
    };
    assert!(refused, "a plain client is served on a TLS socket");

    // At the cap of one connection, a new one closes an idle one: a
    // socket that never starts its TLS handshake, here.
    let mut idle = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let u = unique("u");
    let mut c = RateLimitServiceClient::new(uds_channel(&sock, Some(&ca)).await.unwrap());
    let got = overall_codes(&mut c, &request("s", vec![desc(&[("user", &u)])]), 3).await;
    assert_eq!(got, vec![OK, OK, OVER]);
    let mut buf = [0u8; 1];
    match std::io::Read::read(&mut idle, &mut buf) {
        Ok(0) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        other => panic!("the idle socket was not closed at the cap: {other:?}"),
    }
}

fn field<'a>(s: &'a Struct, name: &str) -> Option<&'a Kind> {
    s.fields.get(name).and_then(|v| v.kind.as_ref())
}

fn strings(k: Option<&Kind>) -> Vec<String> {
    match k {
        Some(Kind::ListValue(l)) => l
            .values
            .iter()
            .map(|v| match &v.kind {
                Some(Kind::StringValue(s)) => s.clone(),
                other => panic!("not a string: {other:?}"),
            })
            .collect(),
        other => panic!("not a list: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamic_metadata_carries_the_request() {
    not_near_hour_end();
    let redis = Redis::start();
    let u = unique("u");
    let mut req = request(
        "s",
        vec![
            desc(&[("user", &u)]),
            desc(&[("user", &format!("{u}-2")), ("page", "/a")]),
        ],
    );
    req.hits_addend = 2;
    req.descriptors[1].limit = Some(RateLimitOverride {
        requests_per_unit: 9,
        unit: 3,
    });
    req.descriptors[1].hits_addend = Some(UInt64Value { value: 1 });

    // Off by default: no metadata.
    let plain = Rls::start(&redis.url(), &[("s.yaml", WITH_METADATA)], &[]);
    let r = call(&mut plain.client().await, req.clone()).await;
    assert_eq!(r.overall_code, OK);
    assert_eq!(r.dynamic_metadata, None);

    let rls = Rls::start(
        &redis.url(),
        &[("s.yaml", WITH_METADATA)],
        &[("RESPONSE_DYNAMIC_METADATA", "true")],
    );
    let mut c = rls.client().await;
    // The first descriptor took 2 of 2 (above) and is over now: the
    // request's part is there whatever the decision, the rule's
    // `metadata` only for a descriptor that passed.
    let r = call(&mut c, req.clone()).await;
    assert_eq!(r.overall_code, OVER);
    let m = r.dynamic_metadata.expect("dynamic_metadata");
    assert!(!m.fields.contains_key("metadata"), "{m:?}");
    assert_eq!(field(&m, "domain"), Some(&Kind::StringValue("s".into())));
    assert_eq!(field(&m, "hitsAddend"), Some(&Kind::NumberValue(2.0)));
    let Some(Kind::ListValue(ds)) = field(&m, "descriptors") else {
        panic!("descriptors: {m:?}");
    };
    let d: Vec<&Struct> = ds
        .values
        .iter()
        .map(|v| match &v.kind {
            Some(Kind::StructValue(s)) => s,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(d.len(), 2);
    assert_eq!(strings(field(d[0], "entries")), vec![format!("user={u}")]);
    assert_eq!(d[0].fields.len(), 1, "no limit, no hits of its own");
    assert_eq!(
        strings(field(d[1], "entries")),
        vec![format!("user={u}-2"), "page=/a".to_string()]
    );
    assert_eq!(
        field(d[1], "limit"),
        Some(&Kind::StringValue("requests_per_unit:9 unit:HOUR".into()))
    );
    assert_eq!(field(d[1], "hitsAddend"), Some(&Kind::NumberValue(1.0)));

    // Passed: with the rule's metadata. Without request hits, no
    // `hitsAddend` at the top.
    let r = call(&mut c, request("s", vec![desc(&[("user", &unique("v"))])])).await;
    assert_eq!(r.overall_code, OK);
    let m = r.dynamic_metadata.expect("dynamic_metadata");
    assert!(!m.fields.contains_key("hitsAddend"), "{m:?}");
    let Some(Kind::StructValue(meta)) = field(&m, "metadata") else {
        panic!("metadata: {m:?}");
    };
    assert_eq!(field(meta, "team"), Some(&Kind::StringValue("edge".into())));
    let Some(Kind::StructValue(labels)) = field(meta, "labels") else {
        panic!("labels: {meta:?}");
    };
    assert_eq!(field(labels, "tier"), Some(&Kind::NumberValue(1.0)));
    assert_eq!(m.fields.len(), 3, "{m:?}");

    // `/json` answers it too, in proto3 JSON.
    let user = unique("j");
    let body = format!(
        r#"{{"domain":"s","descriptors":[{{"entries":[{{"key":"user","value":"{user}"}}]}}]}}"#
    );
    let (code, text) = http_post_json(rls.http_port, &body).unwrap();
    assert_eq!(code, 200, "{text}");
    let reply: serde_json::Value =
        serde_json::from_str(text.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!(
        reply["dynamicMetadata"],
        serde_json::json!({
            "domain": "s",
            "descriptors": [{"entries": [format!("user={user}")]}],
            "metadata": {"team": "edge", "labels": {"tier": 1}}
        })
    );
}

/// `/healthcheck`'s code and the gRPC health service's status for `""`
/// and for the reference's `ratelimit`, once they agree with `want`.
async fn wait_health(rls: &Rls, want: bool, what: &str) {
    let (code, status) = if want {
        (200, SERVING)
    } else {
        (500, NOT_SERVING)
    };
    let start = Instant::now();
    loop {
        let http = http_get(rls.http_port, "/healthcheck")
            .map(|r| r.0)
            .unwrap_or(0);
        let grpc = (
            grpc_health(rls, "").await,
            grpc_health(rls, "ratelimit").await,
            grpc_health(rls, "envoy.service.ratelimit.v3.RateLimitService").await,
        );
        if http == code && grpc == (status, status, status) {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "{what}: /healthcheck {http}, gRPC health {grpc:?}: {}",
            rls.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_follows_the_redis_connection_when_asked() {
    let mut redis = Redis::start();
    let rls = Rls::start(
        &redis.url(),
        &[("s.yaml", CONFIG)],
        &[("REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", "true")],
    );
    // Without the setting, as the reference: healthy whatever Redis does.
    let plain = Rls::start(&redis.url(), &[("s.yaml", CONFIG)], &[]);
    wait_health(&rls, true, "Redis up").await;
    for round in 0..2 {
        tokio::task::block_in_place(|| redis.stop());
        wait_health(&rls, false, &format!("Redis stopped ({round})")).await;
        assert_eq!(http_get(plain.http_port, "/healthcheck").unwrap().0, 200);
        tokio::task::block_in_place(|| redis.restart());
        wait_health(&rls, true, &format!("Redis back ({round})")).await;
    }
    assert!(rls
        .log_text()
        .contains("Redis cannot be reached: unhealthy until it answers"));
    // Decisions again once healthy.
    let mut c = rls.client().await;
    let r = call(&mut c, request("s", vec![desc(&[("user", &unique("u"))])])).await;
    assert_eq!(r.overall_code, OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_health_follows_the_first_config_with_a_domain() {
    let redis = Redis::start();
    let rls = Rls::try_start_unhealthy(
        &redis.url(),
        &[],
        &[("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "true")],
    );
    wait_health(&rls, false, "no config yet").await;
    let data = std::fs::canonicalize(rls.root.join("current")).unwrap();
    std::fs::write(data.join("config/s.yaml"), CONFIG).unwrap();
    wait_health(&rls, true, "a config with a domain").await;
    std::fs::remove_file(data.join("config/s.yaml")).unwrap();
    wait_health(&rls, false, "no domain any more").await;
}

#[test]
fn a_service_started_before_its_redis_waits_for_it() {
    not_near_hour_end();
    // The service binds its ports only once Redis answers, seconds after
    // they were found free: the whole start is tried again on others.
    on_free_ports(started_before_its_redis);
}

fn started_before_its_redis() -> Result<(), String> {
    let port = free_port();
    let rls = Rls::spawn(
        runtime(&[("s.yaml", CONFIG)]),
        &format!("127.0.0.1:{port}"),
        &[
            ("REDIS_STARTUP_INITIAL_INTERVAL", "100ms"),
            ("REDIS_STARTUP_MAX_INTERVAL", "400ms"),
        ],
        &[],
    );
    // Waiting: alive, no listener yet, each failure logged.
    wait_until("a retry in the log", Duration::from_secs(15), || {
        rls.log_text().contains(&format!(
            "Retrying Redis connection to 127.0.0.1:{port} in "
        ))
    });
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        http_get(rls.http_port, "/healthcheck").is_err() && !listening(rls.grpc_port),
        "listening before Redis answers: {}",
        rls.log_text()
    );
    let _redis = Redis::start_on(port);
    let rls = rls.wait_started(true)?;
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut c = rls.client().await;
        let r = call(&mut c, request("s", vec![desc(&[("user", &unique("u"))])])).await;
        assert_eq!(r.overall_code, OK);
    });
    Ok(())
}

#[test]
fn a_service_whose_redis_never_comes_exits_in_time() {
    // Nothing listens there.
    let port = free_port();
    let start = Instant::now();
    let text = Rls::try_start_healthy(
        &format!("127.0.0.1:{port}"),
        &[("s.yaml", CONFIG)],
        &[
            ("REDIS_STARTUP_INITIAL_INTERVAL", "200ms"),
            ("REDIS_STARTUP_MAX_INTERVAL", "1s"),
            ("REDIS_STARTUP_MAX_ELAPSED_TIME", "2s"),
        ],
    )
    .err()
    .expect("the service exits");
    let took = start.elapsed();
    assert!(took >= Duration::from_secs(2), "gave up after {took:?}");
    assert!(text.contains("exited with exit status: 1"), "{text}");
    let lead = format!(
        "redis-cell-rls: timed out waiting for Redis connection to 127.0.0.1:{port} after "
    );
    let after = text
        .split(&lead)
        .nth(1)
        .and_then(|rest| rest.split_once("s: "))
        .and_then(|(secs, _)| secs.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("{text}"));
    // At the bound, plus the last attempt (REDIS_TIMEOUT, 2 s here) and
    // some slack for a loaded machine.
    assert!((2.0..6.0).contains(&after), "{text}");
    assert!(text.contains("Connection refused"), "{text}");
    assert!(text.contains("Retrying Redis connection to"), "{text}");
}
