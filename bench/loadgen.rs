//! A pipelined load generator for operations of several commands, which
//! redis-benchmark cannot send (MULTI ... EXEC, a command pair):
//!
//!     loadgen --port 6379 [--clients 50] [--pipeline 16] [--requests N]
//!             [--keyspace 100000] CMD ARG ... [";" CMD ARG ...]
//!
//! `__rand_int__` in an argument is replaced, as in redis-benchmark, by a
//! random zero-padded number below the keyspace, the same one for every
//! command of an operation. Prints the operations per second; an error
//! reply makes it fail.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Instant;

struct Options {
    port: u16,
    clients: usize,
    pipeline: usize,
    requests: i64,
    keyspace: u64,
    commands: Vec<Vec<String>>,
}

fn parse() -> Options {
    let mut o = Options {
        port: 6379,
        clients: 50,
        pipeline: 16,
        requests: 100_000,
        keyspace: 100_000,
        commands: vec![vec![]],
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().expect("a value after the option");
        match a.as_str() {
            "--port" => o.port = value().parse().expect("port"),
            "--clients" => o.clients = value().parse().expect("clients"),
            "--pipeline" => o.pipeline = value().parse().expect("pipeline"),
            "--requests" => o.requests = value().parse().expect("requests"),
            "--keyspace" => o.keyspace = value().parse().expect("keyspace"),
            ";" => o.commands.push(vec![]),
            word => o.commands.last_mut().unwrap().push(word.to_string()),
        }
    }
    o.commands.retain(|c| !c.is_empty());
    assert!(!o.commands.is_empty(), "no command given");
    o
}

/// Reads one reply; true if it (or anything inside it) was an error.
fn skip_reply(r: &mut impl BufRead, line: &mut String) -> bool {
    line.clear();
    r.read_line(line).expect("read a reply");
    let (kind, rest) = line.split_at(1);
    let n: i64 = rest.trim_end().parse().unwrap_or(0);
    match kind {
        "-" => true,
        "$" if n >= 0 => {
            let mut buf = vec![0; n as usize + 2];
            std::io::Read::read_exact(r, &mut buf).expect("read a bulk string");
            false
        }
        "*" => {
            let mut error = false;
            for _ in 0..n.max(0) {
                error |= skip_reply(r, line);
            }
            error
        }
        _ => false,
    }
}

fn resp(words: &[String], rand: &str) -> Vec<u8> {
    let mut out = format!("*{}\r\n", words.len()).into_bytes();
    for w in words {
        let w = w.replace("__rand_int__", rand);
        out.extend_from_slice(format!("${}\r\n{w}\r\n", w.len()).as_bytes());
    }
    out
}

fn main() {
    let o = Arc::new(parse());
    let left = Arc::new(AtomicI64::new(o.requests));
    let start = Instant::now();
    let threads: Vec<_> = (0..o.clients)
        .map(|t| {
            let (o, left) = (o.clone(), left.clone());
            std::thread::spawn(move || {
                let stream = TcpStream::connect(("127.0.0.1", o.port)).expect("connect");
                stream.set_nodelay(true).ok();
                let mut writer = stream.try_clone().expect("clone the stream");
                let mut reader = BufReader::with_capacity(1 << 16, stream);
                let mut seed = 0x9E37_79B9_7F4A_7C15u64 ^ (t as u64 + 1).wrapping_mul(0x2545_F491);
                let mut line = String::new();
                loop {
                    let batch = left.fetch_sub(o.pipeline as i64, Ordering::Relaxed);
                    if batch <= 0 {
                        break;
                    }
                    let n = (batch as usize).min(o.pipeline);
                    let mut out = Vec::new();
                    for _ in 0..n {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        let rand = format!("{:012}", seed % o.keyspace);
                        for c in &o.commands {
                            out.extend_from_slice(&resp(c, &rand));
                        }
                    }
                    writer.write_all(&out).expect("send");
                    for _ in 0..n * o.commands.len() {
                        assert!(!skip_reply(&mut reader, &mut line), "an error reply");
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a client failed");
    }
    let secs = start.elapsed().as_secs_f64();
    println!("{:.0}", o.requests as f64 / secs);
}
