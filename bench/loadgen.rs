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

type Result<T> = std::result::Result<T, String>;

struct Options {
    port: u16,
    clients: usize,
    pipeline: usize,
    requests: i64,
    keyspace: u64,
    commands: Vec<Vec<String>>,
}

fn parse() -> Result<Options> {
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
        let mut value = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--port" => o.port = number(&a, value()?)?,
            "--clients" => o.clients = number(&a, value()?)?,
            "--pipeline" => o.pipeline = number(&a, value()?)?,
            "--requests" => o.requests = number(&a, value()?)?,
            "--keyspace" => o.keyspace = number(&a, value()?)?,
            ";" => o.commands.push(vec![]),
            word => o
                .commands
                .last_mut()
                .into_iter()
                .for_each(|c| c.push(word.to_string())),
        }
    }
    o.commands.retain(|c| !c.is_empty());
    if o.commands.is_empty() || o.keyspace == 0 || o.pipeline == 0 {
        return Err("a command, a keyspace and a pipeline above 0 are needed".into());
    }
    Ok(o)
}

fn number<T: std::str::FromStr>(option: &str, value: String) -> Result<T>
where
    T::Err: std::fmt::Display,
{
    value.parse().map_err(|e| format!("{option} {value}: {e}"))
}

/// Reads one reply; true if it (or anything inside it) was an error.
fn skip_reply(r: &mut impl BufRead, line: &mut String) -> Result<bool> {
    line.clear();
    r.read_line(line)
        .map_err(|e| format!("read a reply: {e}"))?;
    if line.is_empty() {
        return Err("the server closed the connection".into());
    }
    let (kind, rest) = line.split_at(1);
    let n: i64 = rest.trim_end().parse().unwrap_or(0);
    Ok(match kind {
        "-" => true,
        "$" if n >= 0 => {
            let mut buf = vec![0; n as usize + 2];
            r.read_exact(&mut buf)
                .map_err(|e| format!("read a bulk string: {e}"))?;
            false
        }
        "*" => {
            let mut error = false;
            for _ in 0..n.max(0) {
                error |= skip_reply(r, line)?;
            }
            error
        }
        _ => false,
    })
}

fn resp(words: &[String], rand: &str) -> Vec<u8> {
    let mut out = format!("*{}\r\n", words.len()).into_bytes();
    for w in words {
        let w = w.replace("__rand_int__", rand);
        out.extend_from_slice(format!("${}\r\n{w}\r\n", w.len()).as_bytes());
    }
    out
}

/// One client: sends batches of `pipeline` operations until the shared
/// count of requests runs out.
fn client(o: &Options, left: &AtomicI64, t: usize) -> Result<()> {
    let stream = TcpStream::connect(("127.0.0.1", o.port)).map_err(|e| format!("connect: {e}"))?;
    stream.set_nodelay(true).ok();
    let mut writer = stream.try_clone().map_err(|e| e.to_string())?;
    let mut reader = BufReader::with_capacity(1 << 16, stream);
    let mut seed = 0x9E37_79B9_7F4A_7C15u64 ^ (t as u64 + 1).wrapping_mul(0x2545_F491);
    let mut line = String::new();
    loop {
        let batch = left.fetch_sub(o.pipeline as i64, Ordering::Relaxed);
        if batch <= 0 {
            return Ok(());
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
        writer.write_all(&out).map_err(|e| format!("send: {e}"))?;
        for _ in 0..n * o.commands.len() {
            if skip_reply(&mut reader, &mut line)? {
                return Err("an error reply".into());
            }
        }
    }
}

fn main() -> Result<()> {
    let o = Arc::new(parse()?);
    let left = Arc::new(AtomicI64::new(o.requests));
    let start = Instant::now();
    let threads: Vec<_> = (0..o.clients)
        .map(|t| {
            let (o, left) = (o.clone(), left.clone());
            std::thread::spawn(move || client(&o, &left, t))
        })
        .collect();
    for t in threads {
        t.join().map_err(|_| "a client failed".to_string())??;
    }
    let secs = start.elapsed().as_secs_f64();
    println!("{:.0}", o.requests as f64 / secs);
    Ok(())
}
