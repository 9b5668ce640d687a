//! The suite's helpers: servers with the module loaded (started by the
//! test kit, with a clock the test controls), commands as lines, and the
//! workloads and readers the tests share.
//!
//! Nothing here skips: a missing server binary, a missing module or a module
//! that fails to load makes the test fail with the reason.

use std::path::PathBuf;
use std::time::{Duration, Instant};

pub use redis::Value;

/// 2023-11-14T22:13:20Z, the instant of the reference transcripts.
pub const T0: i64 = 1_700_000_000_000_000_000;
pub const SEC: i64 = 1_000_000_000;
pub const MS: i64 = 1_000_000;

/// The commands users call, in the order of the README's ACL recipe. All
/// but the last, `CL.LIMIT` (which calls a policy), have a function in the
/// twin.
pub const USER_COMMANDS: [&str; 16] = [
    "cl.throttle",
    "cl.peek",
    "cl.throttleall",
    "cl.reserve",
    "cl.refund",
    "sw.allow",
    "sw.peek",
    "sw.refund",
    "fw.incr",
    "fw.peek",
    "fw.refund",
    "cc.acquire",
    "cc.release",
    "cc.renew",
    "cc.peek",
    "cl.limit",
];

/// The module under test: `$REDIS_CELL_MODULE`, or the release build.
pub fn module_path() -> PathBuf {
    let path = testkit::module_path();
    assert!(
        path.is_file(),
        "module not found at {}: run `cargo build --release` first",
        path.display()
    );
    path
}

/// The server under test, as `--version` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerVersion {
    pub valkey: bool,
    pub major: u32,
    pub minor: u32,
}

impl ServerVersion {
    /// Whether the server has what Redis `major.minor` has. Every Valkey
    /// (forked from Redis 7.2) has all of Redis 7.2.
    pub fn has_redis(&self, major: u32, minor: u32) -> bool {
        let own = if self.valkey {
            (7, 2)
        } else {
            (self.major, self.minor)
        };
        own >= (major, minor)
    }

    /// Functions, `EVAL_RO`, `PEXPIRETIME`, `COMMAND DOCS`, key specs and
    /// `enable-debug-command` all came with Redis 7.0.
    pub fn has_7_0(&self) -> bool {
        self.has_redis(7, 0)
    }

    /// Internal commands (Redis 8): the replication-only commands are
    /// unknown to client connections, and `DEBUG MARK-INTERNAL-CLIENT`
    /// makes a connection internal. Valkey has none.
    pub fn has_internal_commands(&self) -> bool {
        !self.valkey && self.major >= 8
    }
}

/// The version of the server under test (`$REDIS_SERVER`), read once.
pub fn server_version() -> ServerVersion {
    static VERSION: std::sync::OnceLock<ServerVersion> = std::sync::OnceLock::new();
    *VERSION.get_or_init(|| {
        let text = testkit::version_text(&testkit::server_binary());
        let v = text
            .split_whitespace()
            .find_map(|w| w.strip_prefix("v="))
            .unwrap_or_else(|| panic!("no version in {text:?}"));
        let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
        ServerVersion {
            valkey: text.starts_with("Valkey"),
            major: parts.next().unwrap_or(0),
            minor: parts.next().unwrap_or(0),
        }
    })
}

/// One server with the module (unless asked otherwise), started by the
/// test kit, killed when dropped.
pub struct Server {
    pub port: u16,
    pub dir: PathBuf,
    kit: testkit::Server,
}

/// How to start a server.
#[derive(Clone, Default)]
pub struct Options {
    /// Extra `--name value` configuration.
    pub config: Vec<(String, String)>,
    /// Reuse this data directory (for restarts); a fresh one otherwise.
    pub dir: Option<PathBuf>,
    /// Start with the real clock instead of the controlled one.
    pub real_clock: bool,
    /// Arguments for the module (`loadmodule path args...`).
    pub module_args: Vec<String>,
    /// A plain server, without the module (what an operator who unloaded
    /// it has, or a managed service).
    pub without_module: bool,
    /// Extra environment variables for the server (`TZDIR`, say).
    pub env: Vec<(String, String)>,
}

/// An append-only file of commands only: no RDB preamble in its rewrites.
pub const AOF_OF_COMMANDS: [(&str, &str); 2] =
    [("appendonly", "yes"), ("aof-use-rdb-preamble", "no")];

/// `--name value` pairs as [`Options::config`] holds them.
pub fn config(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect()
}

impl Options {
    /// The default options with `pairs` as configuration.
    pub fn with_config(pairs: &[(&str, &str)]) -> Self {
        Options {
            config: config(pairs),
            ..Options::default()
        }
    }

    /// What the test kit starts for these options: the clock frozen at
    /// [`T0`] unless `real_clock`.
    pub fn spec(&self) -> testkit::Spec {
        let mut config = Vec::new();
        if server_version().has_7_0() {
            // For DEBUG DIGEST comparisons (always allowed before 7.0).
            config.push(("enable-debug-command".to_string(), "local".to_string()));
        }
        config.extend(self.config.iter().cloned());
        testkit::Spec {
            modules: if self.without_module {
                Vec::new()
            } else {
                vec![(module_path(), self.module_args.clone())]
            },
            config,
            dir: self.dir.clone(),
            clock: if self.real_clock {
                testkit::Clock::Real
            } else {
                testkit::Clock::At(T0)
            },
            env: self.env.clone(),
            ..testkit::Spec::default()
        }
    }
}

impl Server {
    /// A server with the module and the clock frozen at [`T0`].
    pub fn start() -> Self {
        Self::with(Options::default())
    }

    pub fn with(opts: Options) -> Self {
        Self::from_kit(testkit::Server::start(opts.spec()))
    }

    /// A server with the module on the data in `dir` (a restart), with
    /// `pairs` as configuration.
    pub fn on(dir: PathBuf, pairs: &[(&str, &str)]) -> Self {
        Self::with(Options {
            dir: Some(dir),
            ..Options::with_config(pairs)
        })
    }

    pub fn from_kit(kit: testkit::Server) -> Self {
        Server {
            port: kit.port,
            dir: kit.dir.clone(),
            kit,
        }
    }

    /// Starts a server that must refuse to start (a damaged data file, a
    /// configuration it rejects): its exit status and its log.
    pub fn refusing_to_start(opts: Options) -> (std::process::ExitStatus, String) {
        match testkit::Server::try_start(opts.spec()) {
            Ok(server) => panic!("server started on port {}", server.port),
            Err(testkit::Exit {
                status: Some(status),
                log,
            }) => (status, log),
            Err(hung) => panic!("{hung}"),
        }
    }

    /// A connection that may call every command, as the replication
    /// stream and the AOF do: internal where the server has internal
    /// commands. Tests of what clients see use [`Server::user_conn`].
    pub fn conn(&self) -> redis::Connection {
        let mut c = self.user_conn();
        if server_version().has_internal_commands() {
            redis::cmd("DEBUG")
                .arg("MARK-INTERNAL-CLIENT")
                .query::<()>(&mut c)
                .expect("DEBUG MARK-INTERNAL-CLIENT");
        }
        c
    }

    /// A client's connection, to which internal commands are unknown.
    pub fn user_conn(&self) -> redis::Connection {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .expect("a client for the test server");
        let c = client
            .get_connection_with_timeout(Duration::from_secs(2))
            .expect("connect to test server");
        c.set_read_timeout(Some(Duration::from_secs(30)))
            .expect("set a read timeout");
        c
    }

    /// The server's log (what it wrote to stdout and stderr).
    pub fn log(&self) -> String {
        self.kit.log()
    }

    /// Sets the server's wall clock (nanoseconds since the epoch).
    pub fn set_time(&self, nanos: i64) {
        self.kit.set_time(nanos);
    }

    /// Stops the server (killing it) and returns its data directory for a
    /// restart.
    pub fn stop(self) -> PathBuf {
        self.kit.stop()
    }

    /// Stops the server, and sets the clock a server started again on its
    /// data directory (returned) starts with: downtime until `nanos`.
    pub fn stop_until(self, nanos: i64) -> PathBuf {
        let dir = self.stop();
        testkit::write_clock(&dir, Some(nanos));
        dir
    }
}

/// An empty data directory, for a test whose server restarts on its
/// files; `name` sets it apart from every other test's.
pub fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("redis-cell-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Sends one command given as words; returns the reply or the error text.
pub fn run(c: &mut redis::Connection, words: &[&[u8]]) -> Result<Value, String> {
    let mut cmd = redis::cmd(std::str::from_utf8(words[0]).unwrap());
    for w in &words[1..] {
        cmd.arg(*w);
    }
    cmd.query::<Value>(c).map_err(error_text)
}

/// The full error line as the server sent it (`ERR ...`, `WRONGTYPE ...`).
pub fn error_text(e: redis::RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_string(),
        _ => e.to_string(),
    }
}

/// Sends a command written as one line of space-separated words.
pub fn cmd(c: &mut redis::Connection, line: &str) -> Result<Value, String> {
    let words: Vec<&[u8]> = line.split_whitespace().map(str::as_bytes).collect();
    run(c, &words)
}

/// A command whose reply must be the five integers.
pub fn five(c: &mut redis::Connection, line: &str) -> [i64; 5] {
    match cmd(c, line) {
        Ok(Value::Array(items)) if items.len() == 5 => {
            let mut out = [0; 5];
            for (o, v) in out.iter_mut().zip(items) {
                match v {
                    Value::Int(i) => *o = i,
                    other => panic!("{line}: non-integer element {other:?}"),
                }
            }
            out
        }
        other => panic!("{line}: expected five integers, got {other:?}"),
    }
}

/// A counter of `INFO redis-cell` (its name without the section prefix).
pub fn info_field(c: &mut redis::Connection, field: &str) -> i64 {
    info_value(c, "redis-cell", &format!("redis-cell_{field}")) as i64
}

/// A number of `INFO section`.
pub fn info_value(c: &mut redis::Connection, section: &str, field: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg(section).query(c).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in INFO {section}:\n{info}"))
        .trim()
        .parse()
        .unwrap()
}

/// The integers of an array reply.
pub fn ints(v: Value, line: &str) -> Vec<i64> {
    match v {
        Value::Array(items) => items
            .into_iter()
            .map(|i| match i {
                Value::Int(n) => n,
                other => panic!("{line}: non-integer {other:?}"),
            })
            .collect(),
        other => panic!("{line}: expected integers, got {other:?}"),
    }
}

/// A call that must answer six integers (`CL.THROTTLEALL`).
pub fn six(c: &mut redis::Connection, line: &str) -> [i64; 6] {
    let v = ints(cmd(c, line).unwrap_or_else(|e| panic!("{line}: {e}")), line);
    v.try_into()
        .unwrap_or_else(|v| panic!("{line}: expected six integers, got {v:?}"))
}

/// A command that must fail; returns the error line.
pub fn err(c: &mut redis::Connection, line: &str) -> String {
    match cmd(c, line) {
        Err(e) => e,
        Ok(v) => panic!("{line}: expected an error, got {v:?}"),
    }
}

pub fn get(c: &mut redis::Connection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(c).unwrap()
}

pub fn pttl(c: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query(c).unwrap()
}

pub fn ping(c: &mut redis::Connection) {
    let pong: String = redis::cmd("PING").query(c).expect("server still answers");
    assert_eq!(pong, "PONG");
}

/// Waits (bounded) until `f` holds.
pub fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A deterministic mixed workload over every command, with random keys,
/// quantities and clock steps.
pub struct Workload {
    rng: Rng,
    pub now: i64,
    /// Allowed calls that wrote (each one replicated effect).
    pub writes: i64,
    pub refused: i64,
}

impl Workload {
    pub fn new(seed: u64) -> Self {
        Self {
            rng: Rng(seed | 1),
            now: T0,
            writes: 0,
            refused: 0,
        }
    }

    fn next(&mut self, n: u64) -> u64 {
        self.rng.below(n)
    }

    /// Every key the workload may touch.
    pub fn keys() -> Vec<String> {
        let mut keys = Vec::new();
        for kind in ["cl", "sw", "swa", "fw", "fwa", "cc"] {
            for i in 0..4 {
                keys.push(format!("rl:{kind}:{i}"));
            }
            keys.push(format!("rl:{kind}:last"));
        }
        keys
    }

    /// One allowed write of each kind on keys of its own with hour-long
    /// windows, so that every kind of state outlives a restart.
    pub fn finish(&mut self, c: &mut redis::Connection) {
        for line in [
            "CL.THROTTLE rl:cl:last 4 10 3600",
            "SW.ALLOW rl:sw:last 6 3600 2",
            "SW.ALLOW rl:swa:last 6 3600 APPROX",
            "FW.INCR rl:fw:last 5 3600 3",
            "FW.INCR rl:fwa:last 5 3600 ALIGN",
        ] {
            assert_eq!(five(c, line)[0], 0, "{line}");
            self.writes += 1;
        }
        match cmd(c, "CC.ACQUIRE rl:cc:last 3 3600 ID long-running") {
            Ok(Value::Array(v)) if v.first() == Some(&Value::Int(0)) => self.writes += 1,
            other => panic!("CC.ACQUIRE rl:cc:last: {other:?}"),
        }
    }

    /// Runs `steps` calls; `set_time` moves the clock(s) before each call.
    pub fn run(&mut self, c: &mut redis::Connection, steps: usize, set_time: &mut dyn FnMut(i64)) {
        for _ in 0..steps {
            self.now += self.next(60) as i64 * MS + self.next(1_000_000) as i64;
            set_time(self.now);
            let i = self.next(4);
            let q = self.next(4);
            if self.next(8) == 0 {
                // Leases: take, renew or release one of a few ids.
                let id = self.next(5);
                let (line, wrote) = match self.next(3) {
                    0 => {
                        let line = format!("CC.ACQUIRE rl:cc:{i} 3 0.8 ID w{id}");
                        let reply = cmd(c, &line);
                        let taken = matches!(&reply, Ok(Value::Array(v)) if v.first() == Some(&Value::Int(0)));
                        (line, taken)
                    }
                    1 => {
                        let line = format!("CC.RENEW rl:cc:{i} w{id} 1.2");
                        let wrote = cmd(c, &line) == Ok(Value::Int(1));
                        (line, wrote)
                    }
                    _ => {
                        let line = format!("CC.RELEASE rl:cc:{i} w{id}");
                        let wrote = cmd(c, &line) == Ok(Value::Int(1));
                        (line, wrote)
                    }
                };
                if wrote {
                    self.writes += 1;
                } else if line.starts_with("CC.ACQUIRE") {
                    self.refused += 1;
                }
                continue;
            }
            let line = match self.next(7) {
                0 => format!("CL.THROTTLE rl:cl:{i} 4 10 2 {q}"),
                1 => format!("CL.PEEK rl:cl:{i} 4 10 2"),
                2 => format!("SW.ALLOW rl:sw:{i} 6 1.5 {q}"),
                3 => format!("SW.ALLOW rl:swa:{i} 6 2 {q} APPROX"),
                4 => format!("FW.INCR rl:fw:{i} 5 1 {q}"),
                5 => format!("FW.INCR rl:fwa:{i} 5 0.75 ALIGN {q}"),
                _ => {
                    // Two limiters of different kinds, all or nothing.
                    let first = self.next(5) as usize;
                    let second = (first + 1 + self.next(4) as usize) % 5;
                    let reply = all_of(c, &[first, second], i, q);
                    if reply[0] == 1 {
                        self.refused += 1;
                    } else {
                        // A GCRA stores even with quantity 0.
                        for k in [first, second] {
                            self.writes += i64::from(k == 0 || q > 0);
                        }
                    }
                    continue;
                }
            };
            let reply = five(c, &line);
            if reply[0] == 1 {
                self.refused += 1;
            } else if line.starts_with("CL.THROTTLE") || (q > 0 && !line.starts_with("CL.PEEK")) {
                // CL.THROTTLE stores even with quantity 0, as the original
                // does; the other commands record nothing for a peek.
                self.writes += 1;
            }
        }
    }
}

/// The workload's limiters by kind: key prefix and limiter words, as its
/// single commands use them.
const KINDS: [(&str, &str); 5] = [
    ("cl", "GCRA 4 10 2"),
    ("sw", "SW 6 1.5"),
    ("swa", "SW 6 2 APPROX"),
    ("fw", "FW 5 1"),
    ("fwa", "FW 5 0.75 ALIGN"),
];

/// `CL.THROTTLEALL` over the keys of `kinds` with index `i`.
fn all_of(c: &mut redis::Connection, kinds: &[usize], i: u64, q: u64) -> Vec<i64> {
    let keys: Vec<String> = kinds
        .iter()
        .map(|&k| format!("rl:{}:{i}", KINDS[k].0))
        .collect();
    let limiters: Vec<&str> = kinds.iter().map(|&k| KINDS[k].1).collect();
    let line = format!(
        "CL.THROTTLEALL {} {} {} QUANTITY {q}",
        keys.len(),
        keys.join(" "),
        limiters.join(" ")
    );
    match cmd(c, &line) {
        Ok(Value::Array(v)) if v.len() == 6 => v
            .into_iter()
            .map(|x| match x {
                Value::Int(n) => n,
                other => panic!("{line}: {other:?}"),
            })
            .collect(),
        other => panic!("{line}: {other:?}"),
    }
}

/// What a key holds, type-independently: its `DUMP` and absolute expiry.
pub fn snapshot(c: &mut redis::Connection, keys: &[String]) -> Vec<(String, Value, i64)> {
    keys.iter()
        .map(|k| {
            let dump: Value = redis::cmd("DUMP").arg(k).query(c).unwrap();
            (k.clone(), dump, expire_time_ms(c, k))
        })
        .collect()
}

/// How many keys of a [`snapshot`] exist.
pub fn live(snapshot: &[(String, Value, i64)]) -> usize {
    snapshot.iter().filter(|(_, d, _)| *d != Value::Nil).count()
}

/// What a [`snapshot`] taken before a restart must read after it, the
/// clock at `now` then: the keys whose expiry has passed are gone, every
/// other key is byte-identical with the same absolute expiry (a module
/// that replayed commands on the new clock would shift them).
pub fn after_restart_at(before: Vec<(String, Value, i64)>, now: i64) -> Vec<(String, Value, i64)> {
    before
        .into_iter()
        .map(|(k, dump, at)| {
            if at * MS > now {
                (k, dump, at)
            } else {
                (k, Value::Nil, -2)
            }
        })
        .collect()
}

/// Rewrites the AOF (`BGREWRITEAOF`) and waits until the rewrite has
/// succeeded.
pub fn rewrite_aof(c: &mut redis::Connection) {
    cmd(c, "BGREWRITEAOF").unwrap();
    eventually("AOF rewrite", || {
        let info: String = redis::cmd("INFO").arg("persistence").query(c).unwrap();
        info.contains("aof_rewrite_in_progress:0")
            && info.contains("aof_rewrite_scheduled:0")
            && info.contains("aof_last_bgrewrite_status:ok")
    });
}

/// `PEXPIRETIME key`: the absolute expiry in Unix ms, -1 without one, -2
/// for no key. Before Redis 7.0, derived from the server's `TIME` and
/// `PTTL` read in one transaction, which is exact on a frozen clock.
pub fn expire_time_ms(c: &mut redis::Connection, key: &str) -> i64 {
    if server_version().has_7_0() {
        return redis::cmd("PEXPIRETIME").arg(key).query(c).unwrap();
    }
    let ((secs, micros), pttl): ((i64, i64), i64) = redis::pipe()
        .atomic()
        .cmd("TIME")
        .cmd("PTTL")
        .arg(key)
        .query(c)
        .unwrap();
    if pttl < 0 {
        pttl
    } else {
        secs * 1000 + micros / 1000 + pttl
    }
}

/// Creates a key of every built-in type (`list`, `hash`, `set`, `zset`,
/// `stream`), for wrong-type checks.
pub fn keys_of_every_type(c: &mut redis::Connection) {
    for line in [
        "LPUSH list a",
        "HSET hash f v",
        "SADD set m",
        "ZADD zset 1 m",
        "XADD stream * f v",
    ] {
        cmd(c, line).unwrap();
    }
}

/// `want`, an error text as Redis 7.0 and later send it, as the server under
/// test sends it for `line`: before 7.0 the wrong-arity error names the
/// command as the client spelled it, not in lower case.
pub fn as_server_says(line: &str, want: &str) -> String {
    let sent = line.split_whitespace().next().unwrap_or_default();
    if server_version().has_7_0() || !want.starts_with("ERR wrong number of arguments") {
        return want.to_string();
    }
    want.replace(&format!("'{}'", sent.to_lowercase()), &format!("'{sent}'"))
}

/// A server made a replica of `master` (with extra configuration), once
/// its link is up.
pub fn replica_of(master: &Server, config: Vec<(String, String)>) -> Server {
    let replica = Server::with(Options {
        config,
        ..Options::default()
    });
    replica.kit.replicate(master.port);
    replica
}

/// Runs `line` on a fresh connection while another connection watches
/// `key` in a transaction: whether the transaction was aborted.
pub fn aborts_watch(s: &Server, key: &str, line: &str) -> bool {
    let w = &mut s.conn();
    cmd(w, &format!("WATCH {key}")).unwrap();
    let _ = cmd(&mut s.conn(), line);
    cmd(w, "MULTI").unwrap();
    cmd(w, "PING").unwrap();
    cmd(w, "EXEC").unwrap() == Value::Nil
}

/// The keyspace events (`event key`) that `run` fires on `s`, in order.
pub fn keyspace_events(s: &Server, run: impl FnOnce(&mut redis::Connection)) -> Vec<String> {
    let c = &mut s.conn();
    cmd(c, "CONFIG SET notify-keyspace-events KEA").unwrap();
    let mut sub = s.conn();
    let mut pubsub = sub.as_pubsub();
    pubsub.psubscribe("__keyevent@0__:*").unwrap();
    pubsub
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    run(c);
    // A last event marks the end.
    cmd(c, "SET events:end 1").unwrap();
    let mut events = Vec::new();
    loop {
        let msg = pubsub.get_message().unwrap();
        let event = msg
            .get_channel_name()
            .trim_start_matches("__keyevent@0__:")
            .to_string();
        let key: String = msg.get_payload().unwrap();
        if key == "events:end" {
            return events;
        }
        events.push(format!("{event} {key}"));
    }
}

/// A small deterministic random generator (xorshift) for workloads.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub fn pick<'a>(&mut self, items: &[&'a [u8]]) -> &'a [u8] {
        items[self.below(items.len() as u64) as usize]
    }
}

/// The commands appended to the AOF files in `dir` (as upper-case names
/// with their arguments), base files left out.
pub fn aof_commands(dir: &std::path::Path) -> Vec<Vec<String>> {
    let mut files: Vec<std::path::PathBuf> = Vec::new();
    for d in [dir.to_path_buf(), dir.join("appendonlydir")] {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().to_string();
            if name.ends_with(".incr.aof") || name == "appendonly.aof" {
                files.push(entry.path());
            }
        }
    }
    assert!(!files.is_empty(), "no AOF in {}", dir.display());
    let mut commands = Vec::new();
    for file in files {
        let data = std::fs::read(&file).unwrap();
        let text = String::from_utf8_lossy(&data);
        let mut lines = text.split("\r\n");
        while let Some(head) = lines.next() {
            // Anything else (an RDB preamble's bytes) is passed over.
            let Some(n) = head.strip_prefix('*').and_then(|n| n.parse::<usize>().ok()) else {
                continue;
            };
            let words: Vec<String> = (0..n)
                .map(|_| {
                    lines.next(); // $len
                    lines.next().unwrap().to_string()
                })
                .collect();
            commands.push(words);
        }
    }
    commands
}

/// A reply value as text (bulk and simple strings, integers; anything
/// else as its debug form).
pub fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Int(n) => n.to_string(),
        other => format!("{other:?}"),
    }
}

/// `CL.POLICY GET name` as field/value pairs.
pub fn policy(c: &mut redis::Connection, name: &str) -> Vec<(String, String)> {
    match cmd(c, &format!("CL.POLICY GET {name}")) {
        Ok(Value::Array(items)) => items
            .chunks(2)
            .map(|pair| (text(&pair[0]), text(&pair[1])))
            .collect(),
        other => panic!("CL.POLICY GET {name}: {other:?}"),
    }
}

/// Asserts that `line` answers `OK`.
pub fn ok(c: &mut redis::Connection, line: &str) {
    assert_eq!(cmd(c, line), Ok(Value::Okay), "{line} did not answer OK");
}

/// The integer `line` answers.
pub fn int(c: &mut redis::Connection, line: &str) -> i64 {
    match cmd(c, line) {
        Ok(Value::Int(n)) => n,
        other => panic!("{line}: expected an integer, got {other:?}"),
    }
}

pub fn dbsize(c: &mut redis::Connection) -> i64 {
    int(c, "DBSIZE")
}

/// One field of `CL.POLICY GET name`, which must be there.
pub fn policy_field(c: &mut redis::Connection, name: &str, what: &str) -> String {
    policy(c, name)
        .into_iter()
        .find(|(k, _)| k == what)
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("{what} missing from CL.POLICY GET {name}"))
}

/// A counter of `CL.POLICY GET name`.
pub fn policy_counter(c: &mut redis::Connection, name: &str, what: &str) -> i64 {
    policy_field(c, name, what).parse().unwrap()
}

/// `CL.POLICY LIST`.
pub fn policy_list(c: &mut redis::Connection) -> Vec<String> {
    match cmd(c, "CL.POLICY LIST") {
        Ok(Value::Array(items)) => items.iter().map(text).collect(),
        other => panic!("CL.POLICY LIST: {other:?}"),
    }
}

/// `CL.TOP ...` as `(key, count, error, shadow)`.
pub fn top(c: &mut redis::Connection, line: &str) -> Vec<(String, i64, i64, i64)> {
    match cmd(c, line) {
        Ok(Value::Array(rows)) => rows
            .into_iter()
            .map(|row| match row {
                Value::Array(f) => (
                    text(&f[0]),
                    text(&f[1]).parse().unwrap(),
                    text(&f[2]).parse().unwrap(),
                    text(&f[3]).parse().unwrap(),
                ),
                other => panic!("{line}: row {other:?}"),
            })
            .collect(),
        other => panic!("{line}: {other:?}"),
    }
}
