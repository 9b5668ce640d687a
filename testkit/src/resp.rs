//! A small RESP2 client: enough to tell a server is ready, form a cluster
//! and set up replication without a client library.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

/// One reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    Status(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Reply>>),
}

impl Reply {
    /// A status or bulk reply as text; anything else as its debug form.
    pub fn text(&self) -> String {
        match self {
            Reply::Status(s) | Reply::Error(s) => s.clone(),
            Reply::Bulk(Some(b)) => String::from_utf8_lossy(b).into_owned(),
            Reply::Int(n) => n.to_string(),
            other => format!("{other:?}"),
        }
    }

    pub fn items(&self) -> &[Reply] {
        match self {
            Reply::Array(Some(items)) => items,
            _ => &[],
        }
    }
}

/// Sends one command to the server on loopback `port` and reads its reply.
/// An error reply is `Ok(Reply::Error(..))`; `Err` is a connection that
/// failed or a reply that did not come within 10 s.
pub fn call(port: u16, args: &[&str]) -> std::io::Result<Reply> {
    let s = TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_secs(2),
    )?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut req = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        req.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        req.extend_from_slice(a.as_bytes());
        req.extend_from_slice(b"\r\n");
    }
    (&s).write_all(&req)?;
    read(&mut BufReader::new(s))
}

fn bad(what: impl Into<String>) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what.into())
}

fn read(r: &mut impl BufRead) -> std::io::Result<Reply> {
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Err(bad("connection closed"));
    }
    let line = line.trim_end_matches(['\r', '\n']);
    let (kind, rest) = line.split_at(line.len().min(1));
    let number = || {
        rest.parse::<i64>()
            .map_err(|_| bad(format!("bad reply {line:?}")))
    };
    Ok(match kind {
        "+" => Reply::Status(rest.to_string()),
        "-" => Reply::Error(rest.to_string()),
        ":" => Reply::Int(number()?),
        "$" => match number()? {
            n if n < 0 => Reply::Bulk(None),
            n => {
                let mut buf = vec![0; n as usize + 2];
                r.read_exact(&mut buf)?;
                buf.truncate(n as usize);
                Reply::Bulk(Some(buf))
            }
        },
        "*" => match number()? {
            n if n < 0 => Reply::Array(None),
            n => Reply::Array(Some((0..n).map(|_| read(r)).collect::<Result<_, _>>()?)),
        },
        _ => return Err(bad(format!("bad reply {line:?}"))),
    })
}

/// The `field:value` lines of an `INFO` or `CLUSTER INFO` reply.
pub fn field(info: &Reply, name: &str) -> Option<String> {
    info.text().lines().find_map(|l| {
        l.strip_prefix(name)
            .and_then(|v| v.strip_prefix(':'))
            .map(|v| v.trim().to_string())
    })
}
