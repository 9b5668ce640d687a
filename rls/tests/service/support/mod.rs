//! Test harness: a real redis-server with the module on a free loopback
//! port, the service as a child process, a gRPC client, plain HTTP. Every
//! process is killed on drop; every wait is bounded and fails loudly.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::{
    rate_limit_descriptor, RateLimitDescriptor,
};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use tonic::transport::Channel;

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// A port for the service, Envoy or a listener of a test: the test kit's
/// one rule (below the kernel's range for outgoing connections).
pub fn free_port() -> u16 {
    testkit::free_port()
}

/// What `attempt` gives, tried again (three times in all) when it failed
/// with "Address already in use": a port found free may be taken before
/// the service binds it (by another test's process), and each attempt
/// finds its own ports. Any other failure panics with its text.
pub fn on_free_ports<T>(mut attempt: impl FnMut() -> Result<T, String>) -> T {
    let mut last = String::new();
    for _ in 0..3 {
        match attempt() {
            Ok(v) => return v,
            Err(e) if e.contains("Address already in use") => last = e,
            Err(e) => panic!("{e}"),
        }
    }
    panic!("{last}");
}

/// A directory of this test's own (two tests of one run never share one).
pub fn tempdir(tag: &str) -> PathBuf {
    let d = testkit::named_dir(&format!("rls-test-{tag}"));
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn wait_until(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("timed out after {timeout:?} waiting for {what}");
}

/// A server with the module, started by the test kit (`$REDIS_SERVER`,
/// `$REDIS_CELL_MODULE`), killed when dropped.
pub struct Redis {
    pub port: u16,
    kit: testkit::Server,
}

impl Redis {
    pub fn start() -> Redis {
        Redis::start_with(&[])
    }

    /// A server with extra `--name value` configuration.
    pub fn start_with(config: &[&str]) -> Redis {
        Redis::from_kit(testkit::Server::start(spec(config)))
    }

    /// A server with the module on `port`, chosen before (a service may
    /// be waiting for it there).
    pub fn start_on(port: u16) -> Redis {
        let mut s = spec(&[]);
        s.port = Some(port);
        Redis::from_kit(testkit::Server::start(s))
    }

    /// A server without the module (what a user may point the service at).
    pub fn start_without_module() -> Redis {
        Redis::from_kit(testkit::Server::start(spec(&[]).without_module()))
    }

    /// A server with another module than the one under test.
    pub fn start_with_module(module: &Path) -> Redis {
        let mut s = spec(&[]);
        s.modules = vec![(module.to_path_buf(), Vec::new())];
        Redis::from_kit(testkit::Server::start(s))
    }

    /// Kills the server and starts another on the same port, with the
    /// module or without it (a fresh data directory).
    pub fn replace(&mut self, with_module: bool) {
        let port = self.port;
        self.kit.kill();
        let mut s = spec(&[]);
        if !with_module {
            s = s.without_module();
        }
        s.port = Some(port);
        *self = Redis::from_kit(testkit::Server::start(s));
    }

    fn from_kit(kit: testkit::Server) -> Redis {
        assert!(
            kit.spec.modules.iter().all(|(m, _)| m.is_file()),
            "module not found at {:?} (cargo build --release, or set REDIS_CELL_MODULE)",
            kit.spec.modules
        );
        Redis {
            port: kit.port,
            kit,
        }
    }

    /// A three-master cluster, the slots split evenly.
    pub fn cluster() -> Vec<Redis> {
        testkit::cluster(&spec(&[]), 3)
            .into_iter()
            .map(Redis::from_kit)
            .collect()
    }

    /// A server made a replica of `master`, its link up.
    pub fn replica_of(master: &Redis) -> Redis {
        let replica = Redis::start();
        replica.kit.replicate(master.port);
        replica
    }

    /// A command sender for any server on `port` (a sentinel, say).
    pub fn probe(port: u16) -> impl Fn(&[&str]) -> std::io::Result<String> {
        move |args| resp_command(port, args)
    }

    pub fn url(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Sends one command (RESP), answers the raw reply text.
    pub fn try_cmd(&self, args: &[&str]) -> std::io::Result<String> {
        resp_command(self.port, args)
    }

    pub fn cmd(&self, args: &[&str]) -> String {
        self.try_cmd(args).expect("redis command")
    }

    /// The integer value of a key (`GET`), 0 when absent.
    pub fn get_int(&self, key: &str) -> i64 {
        let r = self.cmd(&["GET", key]);
        if r.starts_with("$-1") {
            return 0;
        }
        r.lines()
            .nth(1)
            .and_then(|l| l.trim().parse().ok())
            .unwrap_or_else(|| panic!("GET {key}: {r}"))
    }

    pub fn stop(&mut self) {
        self.kit.kill();
    }

    /// Starts the server again on the same port, with the same data dir.
    pub fn restart(&mut self) {
        self.kit.restart();
    }
}

/// The test kit's spec for a server with the module and `config`, given as
/// `--name value` words.
fn spec(config: &[&str]) -> testkit::Spec {
    assert!(
        config.len().is_multiple_of(2),
        "not --name value pairs: {config:?}"
    );
    let mut spec = testkit::Spec::default();
    for pair in config.chunks(2) {
        let name = pair[0].strip_prefix("--").expect("a --name");
        spec = spec.config(name, pair[1]);
    }
    spec
}

/// Sends one command (RESP) to a server on loopback; answers the raw reply, lowercased.
pub fn resp_command(port: u16, args: &[&str]) -> std::io::Result<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut req = format!("*{}\r\n", args.len());
    for a in args {
        req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    s.write_all(req.as_bytes())?;
    let mut buf = vec![0u8; 65536];
    let n = s.read(&mut buf)?;
    // Long replies (COMMAND INFO) may come in pieces: read what is there.
    let mut out = String::from_utf8_lossy(&buf[..n]).into_owned();
    s.set_read_timeout(Some(Duration::from_millis(50)))?;
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    Ok(out.to_lowercase())
}

pub struct Rls {
    pub grpc_port: u16,
    pub http_port: u16,
    pub debug_port: u16,
    pub metrics_port: u16,
    pub root: PathBuf,
    child: Child,
    pub log: PathBuf,
    uds: Option<PathBuf>,
}

/// The runtime layout the reference reads: `root/current -> data`,
/// `data/config/*.yaml`.
pub fn runtime(files: &[(&str, &str)]) -> PathBuf {
    let root = tempdir("runtime");
    let data = root.join("data1");
    std::fs::create_dir_all(data.join("config")).unwrap();
    for (name, text) in files {
        std::fs::write(data.join("config").join(name), text).unwrap();
    }
    std::os::unix::fs::symlink(&data, root.join("current")).unwrap();
    root
}

impl Rls {
    pub fn start(redis_url: &str, files: &[(&str, &str)], env: &[(&str, &str)]) -> Rls {
        Rls::start_in(runtime(files), redis_url, env)
    }

    pub fn start_in(root: PathBuf, redis_url: &str, env: &[(&str, &str)]) -> Rls {
        Rls::start_wrapped(root, redis_url, env, &[])
    }

    /// The service started through `wrapper`, a command that runs the rest
    /// of its arguments in its own place (`prlimit --nofile=... --`).
    pub fn start_wrapped(
        root: PathBuf,
        redis_url: &str,
        env: &[(&str, &str)],
        wrapper: &[&str],
    ) -> Rls {
        on_free_ports(|| Rls::try_start(root.clone(), redis_url, env, wrapper, true))
    }

    /// The service started, or why it did not (it exited: its log).
    pub fn try_start_healthy(
        redis_url: &str,
        files: &[(&str, &str)],
        env: &[(&str, &str)],
    ) -> Result<Rls, String> {
        Rls::try_start(runtime(files), redis_url, env, &[], true)
    }

    /// The service started where it is expected to report itself
    /// unhealthy: ready once it answers its health check, whatever the
    /// answer, and listens for gRPC.
    pub fn start_unhealthy(redis_url: &str, files: &[(&str, &str)]) -> Rls {
        Rls::try_start_unhealthy(redis_url, files, &[])
    }

    /// [`Rls::start_unhealthy`] with more environment.
    pub fn try_start_unhealthy(
        redis_url: &str,
        files: &[(&str, &str)],
        env: &[(&str, &str)],
    ) -> Rls {
        Rls::try_start(runtime(files), redis_url, env, &[], false).unwrap_or_else(|e| panic!("{e}"))
    }

    fn try_start(
        root: PathBuf,
        redis_url: &str,
        env: &[(&str, &str)],
        wrapper: &[&str],
        healthy: bool,
    ) -> Result<Rls, String> {
        Rls::spawn(root, redis_url, env, wrapper).wait_started(healthy)
    }

    /// The service's process, started without waiting for it.
    pub fn spawn(root: PathBuf, redis_url: &str, env: &[(&str, &str)], wrapper: &[&str]) -> Rls {
        let (grpc_port, http_port, debug_port, metrics_port) =
            (free_port(), free_port(), free_port(), free_port());
        let log = root.join("rls.log");
        let bin = env!("CARGO_BIN_EXE_redis-cell-rls");
        let mut cmd = match wrapper.split_first() {
            None => Command::new(bin),
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(bin);
                c
            }
        };
        cmd.env_clear()
            .env("HOST", "127.0.0.1")
            .env("GRPC_HOST", "127.0.0.1")
            .env("DEBUG_HOST", "127.0.0.1")
            .env("PORT", http_port.to_string())
            .env("GRPC_PORT", grpc_port.to_string())
            .env("DEBUG_PORT", debug_port.to_string())
            .env("USE_STATSD", "false")
            .env("USE_PROMETHEUS", "true")
            .env("PROMETHEUS_ADDR", format!("127.0.0.1:{metrics_port}"))
            .env("REDIS_SOCKET_TYPE", "tcp")
            .env("REDIS_URL", redis_url)
            .env("REDIS_TIMEOUT", "2s")
            .env("REDIS_POOL_SIZE", "2")
            .env("RUNTIME_ROOT", root.join("current"))
            .env("RUNTIME_SUBDIRECTORY", "")
            .env("RUNTIME_POLL_INTERVAL", "100ms")
            .env("LOG_LEVEL", "INFO");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start redis-cell-rls");
        Rls {
            grpc_port,
            http_port,
            debug_port,
            metrics_port,
            root,
            child,
            log,
            // With GRPC_UDS the gRPC listener is that socket.
            uds: env
                .iter()
                .find(|(k, _)| *k == "GRPC_UDS")
                .map(|(_, v)| PathBuf::from(v)),
        }
    }

    /// The service once it answers its health check (200, or anything
    /// when not `healthy`) and listens for gRPC; or why not (it exited).
    pub fn wait_started(mut self, healthy: bool) -> Result<Rls, String> {
        let r = &mut self;
        let uds = r.uds.clone();
        let grpc_listens = |port: u16| match &uds {
            Some(path) => std::os::unix::net::UnixStream::connect(path).is_ok(),
            None => listening(port),
        };
        let start = Instant::now();
        loop {
            if let Ok(Some(status)) = r.child.try_wait() {
                return Err(format!(
                    "redis-cell-rls exited with {status}: {}",
                    std::fs::read_to_string(&r.log).unwrap_or_default()
                ));
            }
            // The service answers its health check before its gRPC
            // listener is bound.
            if http_get(r.http_port, "/healthcheck")
                .map(|(c, _)| c == 200 || (!healthy && c != 0))
                .unwrap_or(false)
                && grpc_listens(r.grpc_port)
            {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(15),
                "redis-cell-rls not healthy: {}",
                r.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(self)
    }

    /// The service's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub async fn client(&self) -> Client {
        RateLimitServiceClient::connect(format!("http://127.0.0.1:{}", self.grpc_port))
            .await
            .expect("grpc connect")
    }

    pub fn metrics(&self) -> String {
        http_get(self.metrics_port, "/metrics").expect("/metrics").1
    }

    /// The value of one sample in `/metrics` (0 when absent).
    pub fn metric(&self, line_prefix: &str) -> u64 {
        self.metrics()
            .lines()
            .find(|l| l.starts_with(line_prefix) && l[line_prefix.len()..].starts_with(' '))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Rls {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether a TCP socket listens on `port` (`/proc/net/tcp`, state `0A`):
/// found without connecting, so that no connection counts against the
/// service's caps.
pub fn listening(port: u16) -> bool {
    let suffix = format!(":{port:04X}");
    std::fs::read_to_string("/proc/net/tcp")
        .expect("/proc/net/tcp")
        .lines()
        .skip(1)
        .any(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            fields.len() > 3 && fields[1].ends_with(&suffix) && fields[3] == "0A"
        })
}

/// A plain HTTP/1.1 request; answers the status code and the whole text.
pub fn http_request(port: u16, raw: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.write_all(raw.as_bytes())?;
    let mut out = Vec::new();
    s.read_to_end(&mut out)?;
    let text = String::from_utf8_lossy(&out).into_owned();
    let code = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Ok((code, text))
}

pub fn http_get(port: u16, path: &str) -> std::io::Result<(u16, String)> {
    http_request(
        port,
        &format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"),
    )
}

/// A `POST /json` of `body` (a `RateLimitRequest` in proto3 JSON).
pub fn http_post_json(port: u16, body: &str) -> std::io::Result<(u16, String)> {
    http_request(
        port,
        &format!(
            "POST /json HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
    )
}

pub fn desc(entries: &[(&str, &str)]) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: entries
            .iter()
            .map(|(k, v)| rate_limit_descriptor::Entry {
                key: k.to_string(),
                value: v.to_string(),
            })
            .collect(),
        ..Default::default()
    }
}

pub fn request(domain: &str, descriptors: Vec<RateLimitDescriptor>) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.into(),
        descriptors,
        hits_addend: 0,
    }
}

/// A gRPC client of the service.
pub type Client = RateLimitServiceClient<Channel>;

pub async fn call(c: &mut Client, r: RateLimitRequest) -> RateLimitResponse {
    c.should_rate_limit(r)
        .await
        .expect("ShouldRateLimit")
        .into_inner()
}

/// The overall code of each of `n` calls of `r`, in order.
pub async fn overall_codes(c: &mut Client, r: &RateLimitRequest, n: usize) -> Vec<i32> {
    let mut got = Vec::with_capacity(n);
    for _ in 0..n {
        got.push(call(c, r.clone()).await.overall_code);
    }
    got
}

/// Each descriptor's code.
pub fn codes(r: &RateLimitResponse) -> Vec<i32> {
    r.statuses.iter().map(|s| s.code).collect()
}

/// Each descriptor's `limit_remaining`.
pub fn remaining(r: &RateLimitResponse) -> Vec<u32> {
    r.statuses.iter().map(|s| s.limit_remaining).collect()
}

/// The first descriptor's limit (its `requests_per_unit`), if it has one.
pub fn limit_of(r: &RateLimitResponse) -> Option<u32> {
    r.statuses[0]
        .current_limit
        .as_ref()
        .map(|l| l.requests_per_unit)
}

pub const OK: i32 = 1;
pub const OVER: i32 = 2;

/// A value no other test run uses, so counters start at zero.
pub fn unique(tag: &str) -> String {
    format!("{tag}-{}-{}", std::process::id(), free_port())
}

pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// The start of the current hour (Unix seconds): the window of an hourly
/// limit, which ends its counter's key.
pub fn hour() -> u64 {
    now_secs() / 3600 * 3600
}

/// Waits out the last minute of the current hour so that a test counting
/// in hourly windows (the longest takes about 20 s) never straddles a
/// window boundary.
pub fn not_near_hour_end() {
    let left = 3600 - now_secs() % 3600;
    if left <= 60 {
        std::thread::sleep(Duration::from_secs(left + 1));
    }
}

/// The gRPC health service's status for `service` (`""`: the server as a
/// whole).
pub async fn grpc_health(rls: &Rls, service: &str) -> i32 {
    let channel =
        tonic::transport::Channel::from_shared(format!("http://127.0.0.1:{}", rls.grpc_port))
            .unwrap()
            .connect()
            .await
            .unwrap();
    health_over(channel, service).await
}

/// The gRPC health service's status for `service` over `channel`.
pub async fn health_over(channel: Channel, service: &str) -> i32 {
    tonic_health::pb::health_client::HealthClient::new(channel)
        .check(tonic_health::pb::HealthCheckRequest {
            service: service.into(),
        })
        .await
        .unwrap()
        .into_inner()
        .status
}

/// Runs `openssl` with `args` in `dir`, failing loudly.
/// Signs the request `csr` with the CA in `dir` (`ca.crt`, `ca.key`) for two
/// days, with the extensions in the file `ext`, into `out`.
pub fn sign_with_ca(dir: &std::path::Path, csr: &str, ext: &str, out: &str) {
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            csr,
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            ext,
            "-out",
            out,
        ],
    );
}

pub fn openssl(dir: &std::path::Path, args: &[&str]) {
    let out = std::process::Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl (the test makes its certificates with it)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A listener of the test's own on 127.0.0.1:`port`, served by `serve` on
/// a thread and runtime of its own until stopped (or dropped): its
/// listener and every connection close then, each connection's task
/// ending with the runtime.
pub struct Served {
    running: Option<(
        tokio::sync::oneshot::Sender<()>,
        std::thread::JoinHandle<()>,
    )>,
}

impl Served {
    pub fn start<F, Fut>(what: &'static str, port: u16, serve: F) -> Served
    where
        F: FnOnce(tokio::net::TcpListener) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()>,
    {
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
                    .await
                    .unwrap_or_else(|e| panic!("{what}: bind {port}: {e}"));
                ready_tx.send(()).unwrap();
                tokio::select! {
                    _ = serve(listener) => {}
                    _ = stop_rx => {}
                }
            });
            drop(rt);
        });
        ready_rx
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("{what} did not start"));
        Served {
            running: Some((stop_tx, thread)),
        }
    }

    pub fn stop(&mut self) {
        if let Some((stop, thread)) = self.running.take() {
            let _ = stop.send(());
            thread.join().unwrap();
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.stop();
    }
}
