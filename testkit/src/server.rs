//! One server process: started on a free port with what a [`Spec`] asks,
//! ready once this very process answers with its modules loaded, killed
//! when dropped.

use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::resp::{call, field, Reply};

/// The one port rule of every suite: a port in 10000..20000, free now
/// together with its cluster bus port (+10000, in 20000..30000). Both are
/// below the kernel's range for outgoing connections (32768..60999), where
/// a client's or a replica's own connection could be holding them. Another
/// process may still bind the port before the server does: [`Server::start`]
/// then starts again on another one.
pub fn free_port() -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let seed = std::process::id().wrapping_mul(7919)
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
    for _ in 0..10_000 {
        let offset = seed.wrapping_add(NEXT.fetch_add(1, Ordering::Relaxed).wrapping_mul(7907));
        let port = 10_000 + (offset % 10_000) as u16;
        let free = |p: u16| TcpListener::bind(("127.0.0.1", p)).is_ok();
        if free(port) && free(port + 10_000) {
            return port;
        }
    }
    panic!("no free loopback port in 10000..20000");
}

/// Whether the servers started from now on die with the thread that starts
/// them (`testkit serve`, whose one thread starts them all: a kit killed by
/// a signal leaves no server behind). Off for the Rust tests, whose test
/// threads end while servers they started may still be in use.
static DIE_WITH_PARENT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub fn die_with_parent() {
    DIE_WITH_PARENT.store(true, Ordering::Relaxed);
}

/// Makes `cmd`'s process die with this thread where [`die_with_parent`]
/// was called.
pub(crate) fn tie_to_parent(cmd: &mut Command) {
    if !DIE_WITH_PARENT.load(Ordering::Relaxed) {
        return;
    }
    extern "C" {
        fn prctl(option: i32, ...) -> i32;
    }
    const PR_SET_PDEATHSIG: i32 = 1;
    const SIGKILL: i32 = 9;
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe, as code between fork and exec
    // must be; it only sets a flag of the new process.
    unsafe {
        cmd.pre_exec(|| {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            Ok(())
        });
    }
}

/// The repository's root (the test kit is one of its crates).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("testkit lives in the repository")
        .to_path_buf()
}

/// The module under test: `$REDIS_CELL_MODULE`, or the release build.
pub fn module_path() -> PathBuf {
    std::env::var_os("REDIS_CELL_MODULE")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target/release/libredis_cell.so"))
}

/// The server binary: `$REDIS_SERVER`, or `redis-server` from the PATH.
pub fn server_binary() -> PathBuf {
    std::env::var_os("REDIS_SERVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("redis-server"))
}

/// The server's wall clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Clock {
    /// The machine's clock, untouched.
    #[default]
    Machine,
    /// The machine's clock until [`Server::set_time`] steps it.
    Real,
    /// Frozen at this instant (nanoseconds since the epoch) until
    /// [`Server::set_time`] steps it; a data directory reused for a restart
    /// keeps the instant it had.
    At(i64),
}

/// What to start.
#[derive(Clone, Debug)]
pub struct Spec {
    pub binary: PathBuf,
    /// Modules to load, each with its arguments: the module under test by
    /// default.
    pub modules: Vec<(PathBuf, Vec<String>)>,
    /// `--name value` configuration, after the kit's own (so it wins).
    pub config: Vec<(String, String)>,
    /// Reuse this data directory (a restart); a fresh one otherwise.
    pub dir: Option<PathBuf>,
    /// Start on this port (a restart on the same address); any free port
    /// otherwise.
    pub port: Option<u16>,
    pub clock: Clock,
    pub env: Vec<(String, String)>,
    /// A cluster node (`cluster-enabled yes`).
    pub cluster: bool,
    /// Also listen on `dir/redis.sock`.
    pub unixsocket: bool,
    /// Also listen with TLS on a second port, with a self-signed
    /// certificate for 127.0.0.1.
    pub tls: bool,
    /// Words to run the server under (`valgrind --tool=callgrind ...`).
    pub wrap: Vec<String>,
}

impl Default for Spec {
    fn default() -> Self {
        Spec {
            binary: server_binary(),
            modules: vec![(module_path(), Vec::new())],
            config: Vec::new(),
            dir: None,
            port: None,
            clock: Clock::Machine,
            env: Vec::new(),
            cluster: false,
            unixsocket: false,
            tls: false,
            wrap: Vec::new(),
        }
    }
}

impl Spec {
    pub fn without_module(mut self) -> Self {
        self.modules.clear();
        self
    }

    pub fn config(mut self, name: &str, value: &str) -> Self {
        self.config.push((name.to_string(), value.to_string()));
        self
    }
}

/// How a server that did not come up ended: its exit status (none if it
/// hung) and its log.
#[derive(Debug)]
pub struct Exit {
    pub status: Option<ExitStatus>,
    pub log: String,
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.status {
            Some(s) => write!(
                f,
                "server exited ({s}) before answering; log:\n{}",
                self.log
            ),
            None => write!(f, "server did not answer in time; log:\n{}", self.log),
        }
    }
}

/// A running server.
pub struct Server {
    pub port: u16,
    pub dir: PathBuf,
    /// The TLS port and the certificate (also its CA) when asked for.
    pub tls: Option<(u16, PathBuf)>,
    /// The unix socket when asked for.
    pub socket: Option<PathBuf>,
    pub spec: Spec,
    child: Child,
    /// A fresh directory of the kit's own, removed when dropped.
    owned_dir: bool,
}

impl Server {
    /// Starts a server, panicking with its log if it does not come up.
    pub fn start(spec: Spec) -> Server {
        Server::try_start(spec).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Starts a server; how it ended if it did not come up (a module that
    /// fails to load, a data file or a configuration it refuses).
    pub fn try_start(spec: Spec) -> Result<Server, Exit> {
        let owned_dir = spec.dir.is_none();
        let dir = spec.dir.clone().unwrap_or_else(fresh_dir);
        fs::create_dir_all(&dir).expect("create the server's directory");
        let mut last = None;
        for attempt in 0..10 {
            let port = spec.port.unwrap_or_else(free_port);
            match spawn(&spec, &dir, port, owned_dir) {
                Ok(Some(server)) => return Ok(server),
                Ok(None) => last = Some(port),
                Err(exit) => {
                    // Its log is in the answer; a directory of the kit's
                    // own is no use to anyone after that.
                    if owned_dir {
                        let _ = fs::remove_dir_all(&dir);
                    }
                    return Err(exit);
                }
            }
            if spec.port.is_some() {
                // The old process's port may take a moment to be free.
                std::thread::sleep(Duration::from_millis(100 * (attempt + 1)));
            }
        }
        panic!("no port to start on (last tried: {last:?})");
    }

    /// The server's log (what it wrote to stdout and stderr).
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    /// One command, answered.
    pub fn call(&self, args: &[&str]) -> Reply {
        call(self.port, args).unwrap_or_else(|e| panic!("{args:?} on port {}: {e}", self.port))
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sets the server's wall clock (nanoseconds since the epoch); the
    /// server must have been started with a controlled [`Clock`].
    pub fn set_time(&self, nanos: i64) {
        assert_ne!(
            self.spec.clock,
            Clock::Machine,
            "the server's clock is not controlled"
        );
        write_clock(&self.dir, Some(nanos));
    }

    /// The file holding the server's controlled clock.
    pub fn clock_file(&self) -> Option<PathBuf> {
        (self.spec.clock != Clock::Machine).then(|| self.dir.join("clock"))
    }

    /// Makes this server a replica of the server on `master` and waits
    /// (bounded) for the link to be up.
    pub fn replicate(&self, master: u16) {
        let r = self.call(&["REPLICAOF", "127.0.0.1", &master.to_string()]);
        assert_eq!(r, Reply::Status("OK".into()), "REPLICAOF");
        wait("the replication link", Duration::from_secs(30), || {
            call(self.port, &["INFO", "replication"])
                .map(|i| field(&i, "master_link_status").as_deref() == Some("up"))
                .unwrap_or(false)
        });
    }

    /// Kills the server and returns its directory, which outlives it.
    pub fn stop(mut self) -> PathBuf {
        self.kill();
        self.owned_dir = false;
        self.dir.clone()
    }

    /// Kills the server and starts it again on the same port and
    /// directory, as a crash and a restart do.
    pub fn restart(&mut self) {
        self.kill();
        let mut spec = self.spec.clone();
        spec.port = Some(self.port);
        spec.dir = Some(self.dir.clone());
        let owned = std::mem::replace(&mut self.owned_dir, false);
        let mut fresh = Server::start(spec);
        fresh.owned_dir = owned;
        *self = fresh;
    }

    /// Kills the server (its directory stays until it is dropped).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
        if self.owned_dir {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// Waits (bounded) until `f` holds; panics naming `what` otherwise.
pub fn wait(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A fresh directory under the system's temporary directory.
pub fn fresh_dir() -> PathBuf {
    named_dir("testkit")
}

/// A fresh directory under the system's temporary directory, named after
/// `tag`: no other call in this process (a counter) nor any other running
/// process (the process id) gets the same one. Not created; what an
/// earlier process of the same id left there is removed.
pub fn named_dir(tag: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = fs::remove_dir_all(&dir);
    dir
}

/// Sets the controlled clock kept in `dir` (`None`: the machine's clock),
/// in place, in the shim's format (testkit/faketime.c): the instant twice,
/// so that a read catching the write half done is seen and repeated.
pub fn write_clock(dir: &Path, nanos: Option<i64>) {
    use std::io::{Seek, Write};
    let text = match nanos {
        Some(n) => format!("{n:020} {n:020}\n"),
        None => format!("{:<41}\n", "real"),
    };
    assert_eq!(
        text.len(),
        42,
        "an instant the clock file cannot hold: {nanos:?}"
    );
    let mut f = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join("clock"))
        .expect("open the clock");
    f.seek(std::io::SeekFrom::Start(0)).expect("seek the clock");
    f.write_all(text.as_bytes()).expect("write the clock");
}

/// Builds the clock shim once per process (atomically: processes may build
/// it at the same time).
pub fn clock_shim() -> PathBuf {
    static SHIM: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    SHIM.get_or_init(|| {
        let dir = repo_root().join("target/faketime");
        fs::create_dir_all(&dir).expect("create target/faketime");
        let out = dir.join("libcell_faketime.so");
        let tmp = dir.join(format!("build-{}.so", std::process::id()));
        let status = Command::new("cc")
            .args(["-shared", "-fPIC", "-O2", "-o"])
            .arg(&tmp)
            .arg(repo_root().join("testkit/faketime.c"))
            .status()
            .expect("a C compiler (cc) is needed to build the test clock");
        assert!(status.success(), "building the test clock failed");
        fs::rename(&tmp, &out).expect("install the test clock");
        out
    })
    .clone()
}

static TLS_FILES: std::sync::OnceLock<(PathBuf, PathBuf)> = std::sync::OnceLock::new();

/// A self-signed certificate for 127.0.0.1 and its key, made once per
/// process by openssl.
pub fn tls_files() -> (PathBuf, PathBuf) {
    TLS_FILES
        .get_or_init(|| {
            let dir = fresh_dir();
            fs::create_dir_all(&dir).expect("create the certificate's directory");
            let (cert, key) = (dir.join("server.crt"), dir.join("server.key"));
            let out = Command::new("openssl")
                .args([
                    "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                ])
                .args([
                    "-subj",
                    "/CN=127.0.0.1",
                    "-addext",
                    "subjectAltName=IP:127.0.0.1",
                ])
                .arg("-keyout")
                .arg(&key)
                .arg("-out")
                .arg(&cert)
                .output()
                .expect("openssl is needed for a TLS server");
            assert!(
                out.status.success(),
                "openssl: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            (cert, key)
        })
        .clone()
}

/// Removes the certificate [`tls_files`] made, if it made one.
pub fn remove_tls_files() {
    if let Some((cert, _)) = TLS_FILES.get() {
        if let Some(dir) = cert.parent() {
            let _ = fs::remove_dir_all(dir);
        }
    }
}

/// Whether a server's log says it was built without TLS (Valkey and Redis 7+
/// start and say so; Redis 6 does not know the `tls-port` setting).
pub fn no_tls_support(log: &str) -> bool {
    log.contains("Failed finding TLS support")
        || (log.contains("FATAL CONFIG FILE ERROR") && log.contains("tls-port"))
}

/// The server's `--version` line.
pub fn version_text(binary: &Path) -> String {
    let out = Command::new(binary)
        .arg("--version")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {} --version: {e}", binary.display()));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Starts the server on `port`: `None` if the port was taken meanwhile.
fn spawn(spec: &Spec, dir: &Path, port: u16, owned_dir: bool) -> Result<Option<Server>, Exit> {
    let log_path = dir.join("server.log");
    let log = fs::File::create(&log_path).expect("create the server's log");
    let mut cmd = match spec.wrap.split_first() {
        Some((first, rest)) => {
            let mut c = Command::new(first);
            c.args(rest).arg(&spec.binary);
            c
        }
        None => Command::new(&spec.binary),
    };
    cmd.arg("--port")
        .arg(port.to_string())
        .args([
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "no",
        ])
        .arg("--dir")
        .arg(dir)
        // Replication timers run on the wall clock, which tests may freeze.
        .args(["--repl-diskless-sync-delay", "0"]);
    for (module, args) in &spec.modules {
        cmd.arg("--loadmodule").arg(module).args(args);
    }
    let mut tls = None;
    if spec.tls {
        let (cert, key) = tls_files();
        let tls_port = free_port();
        cmd.arg("--tls-port").arg(tls_port.to_string());
        cmd.arg("--tls-cert-file")
            .arg(&cert)
            .arg("--tls-key-file")
            .arg(&key);
        cmd.arg("--tls-ca-cert-file")
            .arg(&cert)
            .args(["--tls-auth-clients", "no"]);
        tls = Some((tls_port, cert));
    }
    let socket = spec.unixsocket.then(|| dir.join("redis.sock"));
    if let Some(socket) = &socket {
        cmd.arg("--unixsocket")
            .arg(socket)
            .args(["--unixsocketperm", "700"]);
    }
    if spec.cluster {
        cmd.args(["--cluster-enabled", "yes", "--cluster-config-file"]);
        cmd.arg(dir.join("nodes.conf"));
    }
    if spec.clock != Clock::Machine {
        // jemalloc's background thread waits until an instant it reads
        // from the wall clock, which the kernel measures on the real one:
        // on a clock set in the past it wakes at once, again and again.
        cmd.args(["--jemalloc-bg-thread", "no"]);
    }
    for (k, v) in &spec.config {
        cmd.arg(format!("--{k}")).arg(v);
    }
    match spec.clock {
        Clock::Machine => {}
        Clock::Real => write_clock(dir, None),
        Clock::At(t) => {
            if !dir.join("clock").exists() {
                write_clock(dir, Some(t));
            }
        }
    }
    if spec.clock != Clock::Machine {
        cmd.env("LD_PRELOAD", clock_shim())
            .env("CELL_FAKETIME_FILE", dir.join("clock"));
    }
    tie_to_parent(&mut cmd);
    cmd.envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("the log"))
        .stderr(log);
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", spec.binary.display()));
    let mut server = Server {
        port,
        dir: dir.to_path_buf(),
        tls,
        socket,
        spec: spec.clone(),
        child,
        owned_dir,
    };
    // A bound for a hung start (a loaded machine has taken over 10 s to
    // bring a cluster node up; valgrind takes longer).
    let timeout = Duration::from_secs(if spec.wrap.is_empty() { 60 } else { 300 });
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(Some(status)) = server.child.try_wait() {
            let log = server.log();
            server.owned_dir = false;
            if log.contains("Address already in use") {
                return Ok(None);
            }
            return Err(Exit {
                status: Some(status),
                log,
            });
        }
        if ready(&server) {
            return Ok(Some(server));
        }
        if Instant::now() > deadline {
            let log = server.log();
            server.kill();
            return Err(Exit { status: None, log });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether this very process answers (not another's server on the port),
/// its data loaded and every module of its spec loaded.
fn ready(server: &Server) -> bool {
    let Ok(info) = call(server.port, &["INFO", "server"]) else {
        return false;
    };
    if field(&info, "process_id") != Some(server.child.id().to_string()) {
        return false;
    }
    match call(server.port, &["MODULE", "LIST"]) {
        Ok(Reply::Array(Some(modules))) => {
            // Servers load modules of their own (Redis 8's vectorset,
            // Valkey 9's lua): each of ours must be there, by its path
            // where the server lists paths (7.0 and later), by count where
            // it does not (6.2, which has none of its own).
            let paths: Vec<String> = modules
                .iter()
                .filter_map(|m| {
                    let kv = m.items();
                    kv.chunks(2)
                        .find(|p| p.len() == 2 && p[0].text() == "path")
                        .map(|p| p[1].text())
                })
                .collect();
            let loaded = if paths.is_empty() {
                modules.len() == server.spec.modules.len()
            } else {
                server
                    .spec
                    .modules
                    .iter()
                    .all(|(m, _)| paths.iter().any(|p| Path::new(p) == m))
            };
            assert!(
                loaded,
                "modules loaded on port {}: {modules:?}",
                server.port
            );
            true
        }
        // Still loading its data.
        _ => false,
    }
}
