//! Test harness: a real redis-server with the module on a free loopback
//! port, the service as a child process, a gRPC client, plain HTTP. Every
//! process is killed on drop; every wait is bounded and fails loudly.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
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

pub fn module_path() -> PathBuf {
    let p = std::env::var("REDIS_CELL_MODULE")
        .map(PathBuf::from)
        .unwrap_or_else(|_| repo_root().join("target/release/libredis_cell.so"));
    assert!(
        p.is_file(),
        "module not found at {} (cargo build --release, or set REDIS_CELL_MODULE)",
        p.display()
    );
    p
}

pub fn server_path() -> PathBuf {
    let p = PathBuf::from(
        std::env::var("REDIS_SERVER").unwrap_or_else(|_| "/usr/bin/redis-server".into()),
    );
    assert!(
        p.is_file(),
        "redis server not found at {} (set REDIS_SERVER)",
        p.display()
    );
    p
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A port for a cluster node, free now with its bus port (+10000): in
/// 10000..20000, below the kernel's ephemeral range, so that the bus port
/// is a valid port and not one of the clients' own connections.
fn free_cluster_port() -> u16 {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos()
        ^ std::process::id().wrapping_mul(2_654_435_761);
    let free = |p: u16| TcpListener::bind(("127.0.0.1", p)).is_ok();
    (0..10_000u32)
        .map(|i| 10_000 + ((seed.wrapping_add(i.wrapping_mul(7_919))) % 10_000) as u16)
        .find(|&p| free(p) && free(p + 10_000))
        .expect("no free port for a cluster node in 10000..20000")
}

pub fn tempdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "rls-test-{tag}-{}-{}",
        std::process::id(),
        Instant::now().elapsed().as_nanos() + u128::from(free_port())
    ));
    let _ = std::fs::remove_dir_all(&d);
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

pub struct Redis {
    pub port: u16,
    child: Child,
    pub dir: PathBuf,
    extra: Vec<String>,
}

impl Redis {
    pub fn start() -> Redis {
        Redis::start_with(&[])
    }

    pub fn start_with(extra: &[&str]) -> Redis {
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let dir = tempdir("redis");
        // A port found free may be taken before the server binds it (by
        // another test's connection): try another.
        let mut last = String::new();
        let cluster = extra.iter().any(|a| a == "--cluster-enabled");
        for _ in 0..3 {
            let port = if cluster {
                free_cluster_port()
            } else {
                free_port()
            };
            match Redis::try_start(port, dir.clone(), extra.clone()) {
                Ok(r) => return r,
                Err(e) => last = e,
            }
        }
        panic!("redis-server did not start: {last}");
    }

    fn start_on(port: u16, dir: PathBuf, extra: Vec<String>) -> Redis {
        let mut last = String::new();
        for _ in 0..5 {
            match Redis::try_start(port, dir.clone(), extra.clone()) {
                Ok(r) => return r,
                Err(e) => last = e,
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        panic!("redis-server did not start on port {port}: {last}");
    }

    fn try_start(port: u16, dir: PathBuf, extra: Vec<String>) -> Result<Redis, String> {
        let log = dir.join(format!("redis-{port}.log"));
        let mut cmd = Command::new(server_path());
        cmd.args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--dir",
        ])
        .arg(&dir)
        .arg("--loadmodule")
        .arg(module_path())
        .args(&extra)
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(Stdio::null());
        let child = cmd.spawn().expect("start redis-server");
        let mut r = Redis {
            port,
            child,
            dir,
            extra,
        };
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(status)) = r.child.try_wait() {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                std::mem::forget(r);
                return Err(format!("exited with {status}: {text}"));
            }
            let ready = r
                .try_cmd(&["COMMAND", "INFO", "CL.THROTTLEALL"])
                .map(|s| s.contains("throttleall"))
                .unwrap_or(false);
            // The server answering must be ours, not another test's.
            if ready
                && r.cmd(&["CONFIG", "GET", "dir"])
                    .contains(&r.dir.to_string_lossy().to_lowercase())
            {
                return Ok(r);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        r.stop();
        Err("not ready with the module within 10 s".into())
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
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts the server again on the same port, with the same data dir.
    pub fn restart(&mut self) {
        self.stop();
        let fresh = Redis::start_on(self.port, self.dir.clone(), self.extra.clone());
        let old = std::mem::replace(self, fresh);
        std::mem::forget(old);
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.stop();
    }
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
        // A port found free may be taken before the service binds it (by
        // another test's connection): try other ports.
        let mut last = String::new();
        for _ in 0..3 {
            match Rls::try_start(root.clone(), redis_url, env, wrapper) {
                Ok(r) => return r,
                Err(e) if e.contains("Address already in use") => last = e,
                Err(e) => panic!("{e}"),
            }
        }
        panic!("{last}");
    }

    fn try_start(
        root: PathBuf,
        redis_url: &str,
        env: &[(&str, &str)],
        wrapper: &[&str],
    ) -> Result<Rls, String> {
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
        let mut r = Rls {
            grpc_port,
            http_port,
            debug_port,
            metrics_port,
            root,
            child,
            log,
        };
        let start = Instant::now();
        loop {
            if let Ok(Some(status)) = r.child.try_wait() {
                return Err(format!(
                    "redis-cell-rls exited with {status}: {}",
                    std::fs::read_to_string(&r.log).unwrap_or_default()
                ));
            }
            if http_get(r.http_port, "/healthcheck")
                .map(|(c, _)| c == 200)
                .unwrap_or(false)
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
        Ok(r)
    }

    /// The service's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub async fn client(&self) -> RateLimitServiceClient<Channel> {
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

pub async fn call(
    c: &mut RateLimitServiceClient<Channel>,
    r: RateLimitRequest,
) -> RateLimitResponse {
    c.should_rate_limit(r)
        .await
        .expect("ShouldRateLimit")
        .into_inner()
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

/// Waits out the last minute of the current hour so that a test counting
/// in hourly windows (the longest takes about 20 s) never straddles a
/// window boundary.
pub fn not_near_hour_end() {
    let left = 3600 - now_secs() % 3600;
    if left <= 60 {
        std::thread::sleep(Duration::from_secs(left + 1));
    }
}
