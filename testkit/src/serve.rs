//! `testkit serve`: the test kit for harnesses in other languages.
//!
//! It reads one request a line from standard input (words separated by
//! spaces) and answers each with one line of JSON on standard output. When
//! standard input closes, it kills everything it started, removes their
//! directories and exits. A request given on the command line is served
//! first.
//!
//! ```text
//! server [OPTIONS]              a server
//! cluster MASTERS [OPTIONS]     MASTERS servers formed into a cluster
//! replica ID [OPTIONS]          a server made a replica of server ID, link up
//! sentinel ID SERVICE [--sentinel-config NAME VALUE]...
//!                               a sentinel watching server ID as SERVICE
//! restart ID                    server ID killed and started again on its
//!                               port and directory
//! stop ID                       server, cluster or sentinel ID killed
//! port                          a free port by the kit's rule, for a
//!                               listener of the caller's own (`{"port":N}`)
//!
//! OPTIONS:
//!   --server PATH               the binary ($REDIS_SERVER, or redis-server)
//!   --module PATH               load this module instead of the module under
//!                               test ($REDIS_CELL_MODULE, or the release
//!                               build); repeat for several
//!   --module-arg WORD           one argument for the last module
//!   --no-module                 load none
//!   --config NAME VALUE         `--NAME VALUE` for the server
//!   --dir PATH                  this data directory (kept at the end)
//!   --port PORT                 this port (a stopped server's, say) instead
//!                               of a free one by the kit's rule
//!   --clock NANOS|real          the controlled clock (the answer's "clock"
//!                               is the file to write nanoseconds to)
//!   --env NAME=VALUE            an environment variable for the server
//!   --unixsocket                also listen on a unix socket ("socket")
//!   --tls                       also listen with TLS ("tls_port", "tls_cert")
//!   --wrap WORD                 run the server under this word (repeat:
//!                               --wrap valgrind --wrap --tool=callgrind)
//! ```
//!
//! A server answers `{"id":1,"port":12345,"pid":..,"dir":"..","log":"..",
//! "socket":null,"tls_port":null,"tls_cert":null,"clock":null}`, a cluster
//! `{"id":4,"ports":[..],"nodes":[<a server's answer>, ..]}` (each node
//! with an id of its own), a sentinel `{"id":5,"port":..}`, a stop
//! `{"stopped":5}`. A request that fails answers `{"error":"..."}` (with the
//! server's log), and `"unsupported":"tls"` when the binary has no TLS.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

use crate::{cluster, module_path, Clock, Sentinel, Server, Spec};

enum Started {
    Server(Box<Server>),
    Sentinel(Sentinel),
    Cluster(Vec<u64>),
}

#[derive(Default)]
struct Kit {
    next: u64,
    started: BTreeMap<u64, Started>,
}

/// Serves `first` (when given), then every line of standard input.
pub fn run(first: &[String]) {
    let mut kit = Kit::default();
    // A kit killed by a signal takes its servers with it.
    crate::server::die_with_parent();
    // The kit's own panics become error answers; their messages go there.
    std::panic::set_hook(Box::new(|_| {}));
    let stdout = std::io::stdout();
    let answer = |line: String| {
        let mut out = stdout.lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    };
    if !first.is_empty() {
        answer(kit.serve(first));
    }
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let words: Vec<String> = line.split_whitespace().map(str::to_string).collect();
        if !words.is_empty() {
            answer(kit.serve(&words));
        }
    }
    // Dropping every server kills it (and removes its directory).
    kit.started.clear();
    crate::server::remove_tls_files();
}

impl Kit {
    fn serve(&mut self, words: &[String]) -> String {
        match catch_unwind(AssertUnwindSafe(|| self.request(words))) {
            Ok(Ok(json)) => json,
            Ok(Err(e)) => error(&e),
            Err(panic) => {
                let text = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "the request failed".into());
                error(&text)
            }
        }
    }

    fn request(&mut self, words: &[String]) -> Result<String, String> {
        let (verb, rest) = words.split_first().ok_or("empty request")?;
        match verb.as_str() {
            "server" => {
                let spec = spec(rest)?;
                let server = Server::try_start(spec).map_err(|e| e.to_string())?;
                Ok(self.add(server))
            }
            "cluster" => {
                let (n, rest) = rest.split_first().ok_or("cluster MASTERS [OPTIONS]")?;
                let n: usize = n
                    .parse()
                    .map_err(|_| format!("not a count of masters: {n}"))?;
                let nodes = cluster(&spec(rest)?, n);
                let answers: Vec<String> = nodes.into_iter().map(|s| self.add(s)).collect();
                let ids: Vec<u64> = (self.next - answers.len() as u64 + 1..=self.next).collect();
                let ports: Vec<String> = ids.iter().map(|id| self.port(*id).to_string()).collect();
                let id = self.id();
                self.started.insert(id, Started::Cluster(ids));
                Ok(format!(
                    "{{\"id\":{id},\"ports\":[{}],\"nodes\":[{}]}}",
                    ports.join(","),
                    answers.join(",")
                ))
            }
            "replica" => {
                let (of, rest) = rest.split_first().ok_or("replica ID [OPTIONS]")?;
                let master = self.port(self.known(of)?);
                let server = Server::try_start(spec(rest)?).map_err(|e| e.to_string())?;
                server.replicate(master);
                Ok(self.add(server))
            }
            "sentinel" => {
                let [of, service, options @ ..] = rest else {
                    return Err("sentinel ID SERVICE [--sentinel-config NAME VALUE]...".into());
                };
                let id = self.known(of)?;
                let binary = match self.started.get(&id) {
                    Some(Started::Server(s)) => s.spec.binary.clone(),
                    _ => return Err(format!("{of} is not a server")),
                };
                let mut extra = Vec::new();
                let mut it = options.iter();
                while let Some(o) = it.next() {
                    match (o.as_str(), it.next(), it.next()) {
                        ("--sentinel-config", Some(name), Some(value)) => {
                            extra.push(format!("{name} {service} {value}"))
                        }
                        _ => return Err(format!("unknown sentinel option {o}")),
                    }
                }
                let s = Sentinel::start(&binary, self.port(id), service, &extra);
                let port = s.port;
                let id = self.id();
                self.started.insert(id, Started::Sentinel(s));
                Ok(format!("{{\"id\":{id},\"port\":{port}}}"))
            }
            "restart" => {
                let id = self.known(rest.first().ok_or("restart ID")?)?;
                match self.started.get_mut(&id) {
                    Some(Started::Server(s)) => {
                        s.restart();
                        Ok(describe(id, s))
                    }
                    _ => Err(format!("{id} is not a server")),
                }
            }
            "stop" => {
                let id = self.known(rest.first().ok_or("stop ID")?)?;
                if let Some(Started::Cluster(ids)) = self.started.remove(&id) {
                    for n in ids {
                        self.started.remove(&n);
                    }
                }
                Ok(format!("{{\"stopped\":{id}}}"))
            }
            "port" => Ok(format!("{{\"port\":{}}}", crate::free_port())),
            other => Err(format!("unknown request {other}")),
        }
    }

    fn id(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    fn add(&mut self, server: Server) -> String {
        let id = self.id();
        let json = describe(id, &server);
        self.started.insert(id, Started::Server(Box::new(server)));
        json
    }

    fn known(&self, word: &str) -> Result<u64, String> {
        word.parse::<u64>()
            .ok()
            .filter(|id| self.started.contains_key(id))
            .ok_or_else(|| format!("nothing started as {word}"))
    }

    fn port(&self, id: u64) -> u16 {
        match self.started.get(&id) {
            Some(Started::Server(s)) => s.port,
            Some(Started::Sentinel(s)) => s.port,
            _ => 0,
        }
    }
}

/// The spec that `options` ask for.
fn spec(options: &[String]) -> Result<Spec, String> {
    let mut spec = Spec::default();
    let mut chose_module = false;
    let mut it = options.iter();
    let value = |it: &mut std::slice::Iter<String>, o: &str| {
        it.next()
            .cloned()
            .ok_or_else(|| format!("{o} needs a value"))
    };
    while let Some(o) = it.next() {
        match o.as_str() {
            "--server" => spec.binary = PathBuf::from(value(&mut it, o)?),
            "--module" => {
                if !chose_module {
                    spec.modules.clear();
                    chose_module = true;
                }
                spec.modules
                    .push((PathBuf::from(value(&mut it, o)?), Vec::new()));
            }
            "--module-arg" => {
                let arg = value(&mut it, o)?;
                if spec.modules.is_empty() {
                    spec.modules.push((module_path(), Vec::new()));
                }
                spec.modules.last_mut().unwrap().1.push(arg);
            }
            "--no-module" => {
                spec.modules.clear();
                chose_module = true;
            }
            "--config" => {
                let name = value(&mut it, o)?;
                spec.config.push((name, value(&mut it, o)?));
            }
            "--dir" => spec.dir = Some(PathBuf::from(value(&mut it, o)?)),
            "--port" => {
                let v = value(&mut it, o)?;
                spec.port = Some(v.parse().map_err(|_| format!("--port {v}: not a port"))?);
            }
            "--clock" => {
                let v = value(&mut it, o)?;
                spec.clock = match v.as_str() {
                    "real" => Clock::Real,
                    n => Clock::At(
                        n.parse()
                            .map_err(|_| format!("--clock {n}: not nanoseconds"))?,
                    ),
                }
            }
            "--env" => {
                let v = value(&mut it, o)?;
                let (k, val) = v
                    .split_once('=')
                    .ok_or(format!("--env {v}: not NAME=VALUE"))?;
                spec.env.push((k.to_string(), val.to_string()));
            }
            "--unixsocket" => spec.unixsocket = true,
            "--tls" => spec.tls = true,
            "--wrap" => spec.wrap.push(value(&mut it, o)?),
            other => return Err(format!("unknown option {other}")),
        }
    }
    for (module, _) in &spec.modules {
        if !module.is_file() {
            return Err(format!(
                "module not found at {} (cargo build --release)",
                module.display()
            ));
        }
    }
    Ok(spec)
}

fn describe(id: u64, s: &Server) -> String {
    let path =
        |p: Option<&std::path::Path>| p.map_or("null".into(), |p| quote(&p.to_string_lossy()));
    format!(
        "{{\"id\":{id},\"port\":{},\"pid\":{},\"dir\":{},\"log\":{},\"socket\":{},\"tls_port\":{},\"tls_cert\":{},\"clock\":{}}}",
        s.port,
        s.pid(),
        quote(&s.dir.to_string_lossy()),
        quote(&s.dir.join("server.log").to_string_lossy()),
        path(s.socket.as_deref()),
        s.tls.as_ref().map_or("null".into(), |(p, _)| p.to_string()),
        path(s.tls.as_ref().map(|(_, c)| c.as_path())),
        path(s.clock_file().as_deref()),
    )
}

fn error(text: &str) -> String {
    if crate::server::no_tls_support(text) {
        format!("{{\"error\":{},\"unsupported\":\"tls\"}}", quote(text))
    } else {
        format!("{{\"error\":{}}}", quote(text))
    }
}

/// `text` as a JSON string.
pub fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
