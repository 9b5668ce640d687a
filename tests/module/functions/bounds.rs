//! The Functions twin's lease and exact-log calls stay bounded at every
//! size it accepts, and refuse the sizes beyond with their documented
//! errors, word for word.
//!
//! Each of these calls reads and rewrites its key's whole string, so its
//! cost is linear in the bytes it moves between the key and Lua (the scan
//! of a lease string and the copies of a log are loops over those bytes).
//! Timings would flake on a shared machine; the bytes do not: every call
//! here is traced with MONITOR (which lists each command a script or
//! function runs), and the test adds up what each command moves — a GET
//! the whole value, a GETRANGE its range, a SET its value — and asserts
//! that it stays within the largest state the twin accepts, read twice
//! and written once (a refusal: read twice). The largest states are written in one SET in the twin's
//! own layout (functions/src/sliding.lua, lease.lua), as a library with
//! no caps would have left them, and as the twin itself fills them up to
//! its caps.

use crate::support::*;
use crate::twin::*;
use std::time::Duration;

/// sliding.MAX_LOG, lease.MAX and lease.MAX_ID in functions/src, and the
/// longest strings they allow (a log: 11 bytes and 16 a request; leases:
/// 20 bytes and 11 a lease beside its id).
const LOG_MAX: usize = 10_000;
const LOG_MAX_BYTES: usize = 11 + LOG_MAX * 16;
const LEASES_MAX: usize = 1_000;
const ID_MAX: usize = 128;
const LEASES_MAX_BYTES: usize = 20 + LEASES_MAX * (11 + ID_MAX);

const BIG_LEASES: &str =
    "ERR limit out of the functions' range: at most 1000 leases per key (use the module)";
const LOG_TOO_BIG: &str = "ERR key holds an exact window of more than 10000 requests, more than the functions serve: delete the key or let it expire";
const TOO_MANY_LEASES: &str = "ERR key holds more leases than the functions serve (1000, with ids of at most 128 bytes): delete the key or let the leases expire";
const LONG_ID: &str = "ERR invalid ID: the functions take at most 128 bytes (the module 1024)";
const WRONG_TYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

const HOUR: i64 = 3_600_000_000_000;
const MARK: &str = "twin-bounds-end-of-call";

fn be(v: u64, bytes: usize) -> Vec<u8> {
    v.to_be_bytes()[8 - bytes..].to_vec()
}

/// An exact log of `n` requests of 1, spread over the half hour before
/// [`T0`] (sliding.lua: tag, base, then time and cumulated quantity).
fn log_state(n: usize) -> Vec<u8> {
    let mut v = b"\0SWE".to_vec();
    v.extend(be(0, 7));
    let step = (HOUR / 2) / n as i64;
    for i in 0..n {
        let t = (T0 - HOUR / 2 + i as i64 * step) as u64;
        v.extend(be(t / 1_000_000_000, 5));
        v.extend(be(t % 1_000_000_000, 4));
        v.extend(be(i as u64 + 1, 7));
    }
    v
}

/// Lease `i`'s id, `len` bytes long.
fn lease_id(i: usize, len: usize) -> Vec<u8> {
    let mut id = format!("lease-{i}-").into_bytes();
    id.resize(len, b'x');
    id
}

/// `n` leases with ids of `id_len` bytes, expiring an hour after [`T0`]
/// (lease.lua: tag, id generator, then expiry, id length and id).
fn lease_state(n: usize, id_len: usize) -> Vec<u8> {
    let mut v = b"\0CCL".to_vec();
    v.extend(0f64.to_be_bytes());
    v.extend(0f64.to_be_bytes());
    let x = (T0 + HOUR) as u64;
    for i in 0..n {
        v.extend(be(x / 1_000_000_000, 5));
        v.extend(be(x % 1_000_000_000, 4));
        v.extend(be(id_len as u64, 2));
        v.extend(lease_id(i, id_len));
    }
    v
}

/// The number of leases in a lease string.
fn lease_count(v: &[u8]) -> usize {
    let (mut pos, mut n) = (20, 0);
    while pos < v.len() {
        let len = u16::from_be_bytes([v[pos + 9], v[pos + 10]]) as usize;
        pos += 11 + len;
        n += 1;
    }
    assert_eq!(pos, v.len(), "a damaged lease string");
    n
}

fn value(c: &mut redis::Connection, key: &str) -> Vec<u8> {
    redis::cmd("GET").arg(key).query(c).unwrap()
}

fn put(c: &mut redis::Connection, key: &str, state: &[u8]) {
    redis::cmd("SET")
        .arg(key)
        .arg(state)
        .arg("PX")
        .arg(2 * 3_600_000)
        .query::<()>(c)
        .unwrap();
}

/// The words of a function call (`sw.allow key 100 1h`), with a binary id
/// in place of the word `ID`'s value or `<id>`.
fn call_words(line: &str, id: &[u8]) -> Vec<Vec<u8>> {
    line.split_whitespace()
        .map(|w| {
            if w == "<id>" {
                id.to_vec()
            } else {
                w.as_bytes().to_vec()
            }
        })
        .collect()
}

/// A monitor line's words: `1700000000.000000 [0 lua] "SET" "k" "v\x00"`.
fn monitor_words(line: &str) -> Vec<Vec<u8>> {
    let b = line.as_bytes();
    let (mut i, mut out) = (0, Vec::new());
    while i < b.len() {
        if b[i] != b'"' {
            i += 1;
            continue;
        }
        i += 1;
        let mut w = Vec::new();
        while b[i] != b'"' {
            if b[i] == b'\\' {
                i += 1;
                match b[i] {
                    b'n' => w.push(b'\n'),
                    b'r' => w.push(b'\r'),
                    b't' => w.push(b'\t'),
                    b'a' => w.push(7),
                    b'b' => w.push(8),
                    b'x' => {
                        let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap();
                        w.push(u8::from_str_radix(hex, 16).unwrap());
                        i += 2;
                    }
                    other => w.push(other),
                }
            } else {
                w.push(b[i]);
            }
            i += 1;
        }
        out.push(w);
        i += 1;
    }
    out
}

/// Runs a twin call and returns its reply and the commands it ran on the
/// server, as MONITOR lists them.
fn traced(
    s: &Server,
    c: &mut redis::Connection,
    t: &Twin,
    words: &[Vec<u8>],
) -> (Result<Value, String>, Vec<Vec<Vec<u8>>>) {
    let mut m = s.user_conn();
    m.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    m.send_packed_command(&redis::cmd("MONITOR").get_packed_command())
        .unwrap();
    assert_eq!(m.recv_response().unwrap(), Value::Okay);
    let reply = t.call(c, words);
    redis::cmd("ECHO").arg(MARK).query::<Value>(c).unwrap();
    let mut commands = Vec::new();
    loop {
        let line = match m.recv_response().unwrap() {
            Value::SimpleString(line) => line,
            other => panic!("MONITOR sent {other:?}"),
        };
        if line.contains(MARK) {
            return (reply, commands);
        }
        if let Some((_, rest)) = line.split_once(" lua] ") {
            commands.push(monitor_words(rest));
        }
    }
}

/// The bytes the commands of one call moved between keys and Lua, given
/// the length of the key's value before the call. Every command a lease
/// or log call may run must be listed here: a new one fails the test
/// until it is.
fn bytes_moved(commands: &[Vec<Vec<u8>>], value_len: usize) -> usize {
    let mut total = 0;
    for words in commands {
        let name = String::from_utf8_lossy(&words[0]).to_ascii_uppercase();
        let num = |i: usize| -> usize {
            std::str::from_utf8(&words[i])
                .unwrap()
                .parse::<i64>()
                .unwrap()
                .max(0) as usize
        };
        total += match name.as_str() {
            "GET" => value_len,
            "GETRANGE" => (num(3) + 1).min(value_len).saturating_sub(num(2)),
            "SET" => words[2].len(),
            "TIME" | "EXISTS" | "TYPE" | "PEXPIRETIME" | "PTTL" | "PEXPIREAT" | "DEL" => 0,
            _ => panic!("a command this test does not weigh: {name}"),
        };
    }
    total
}

/// Calls the twin, asserting that the call moved at most `bound` bytes in
/// at most 12 commands; returns its reply.
fn bounded(
    s: &Server,
    c: &mut redis::Connection,
    t: &Twin,
    key: &str,
    words: &[Vec<u8>],
    bound: usize,
) -> Result<Value, String> {
    let before: usize = redis::cmd("STRLEN").arg(key).query(c).unwrap();
    let (reply, commands) = traced(s, c, t, words);
    let moved = bytes_moved(&commands, before);
    let shown = show(words);
    let shown = &shown[..shown.len().min(120)];
    // A trace that missed the function's commands would weigh nothing.
    assert!(
        commands
            .iter()
            .any(|w| w[0].eq_ignore_ascii_case(b"GETRANGE") || w[0].eq_ignore_ascii_case(b"GET")),
        "{shown}: MONITOR showed no read of the key: {commands:?}"
    );
    assert!(
        moved <= bound,
        "{shown}: moved {moved} bytes, more than {bound}, on a value of {before}"
    );
    assert!(
        commands.len() <= 12,
        "{shown}: {} commands: {:?}",
        commands.len(),
        commands.iter().map(|w| show(&w[..1])).collect::<Vec<_>>()
    );
    reply
}

fn ints(reply: Result<Value, String>, what: &str) -> Vec<i64> {
    match reply {
        Ok(Value::Array(items)) => items
            .into_iter()
            .map(|v| match v {
                Value::Int(i) => i,
                Value::Nil => -2,
                Value::BulkString(_) => -3,
                other => panic!("{what}: {other:?}"),
            })
            .collect(),
        Ok(Value::Int(i)) => vec![i],
        other => panic!("{what}: {other:?}"),
    }
}

fn plain_server() -> (Server, redis::Connection, Twin) {
    let s = Server::with(Options {
        without_module: true,
        ..Options::default()
    });
    let mut c = s.conn();
    let t = Twin::load(&mut c);
    (s, c, t)
}

#[test]
fn the_largest_exact_log_is_served_moving_at_most_its_size() {
    let (s, mut c, t) = plain_server();
    let c = &mut c;
    put(c, "log", &log_state(LOG_MAX - 1));
    // Read twice at most (a refund reads again for its answer, as the
    // flat path's read precedes the layered one's), written once, and the
    // few bytes of an entry.
    let bound = 3 * LOG_MAX_BYTES + 64;
    let call = |c: &mut redis::Connection, line: &str| {
        let r = bounded(&s, c, &t, "log", &call_words(line, b""), bound);
        ints(r, line)
    };
    // The request that fills the log to the cap, then the calls on it.
    assert_eq!(call(c, "sw.allow log 10000 1h")[..3], [0, 10000, 0]);
    assert_eq!(value(c, "log").len(), LOG_MAX_BYTES);
    assert_eq!(call(c, "sw.allow log 10000 1h")[..3], [1, 10000, 0]);
    // A peek asks for nothing more: not limited on the full log.
    assert_eq!(call(c, "sw.peek log 10000 1h")[..3], [0, 10000, 0]);
    assert_eq!(
        call(c, "cl.throttleall 1 log SW 10000 1h")[..3],
        [1, 10000, 0]
    );
    assert_eq!(value(c, "log").len(), LOG_MAX_BYTES);
    // A lower limit on the full log: limited, as the module answers.
    assert_eq!(call(c, "sw.allow log 10 1h")[..3], [1, 10, 0]);
    assert_eq!(
        call(c, "sw.refund log 10000 1h 4000")[..3],
        [0, 10000, 4000]
    );
    assert_eq!(call(c, "sw.allow log 10000 1h 4000")[..3], [0, 10000, 0]);
    let len = value(c, "log").len();
    assert!(
        len <= LOG_MAX_BYTES,
        "the log grew past the cap: {len} bytes"
    );
}

#[test]
fn the_largest_lease_string_is_served_moving_at_most_its_size() {
    let (s, mut c, t) = plain_server();
    let c = &mut c;
    // 999 leases with the longest ids; the 1,000th fills the cap.
    put(c, "leases", &lease_state(LEASES_MAX - 1, ID_MAX));
    let bound = 3 * LEASES_MAX_BYTES + 64;
    let call = |c: &mut redis::Connection, line: &str, id: &[u8]| {
        let r = bounded(&s, c, &t, "leases", &call_words(line, id), bound);
        ints(r, line)
    };
    let new_id = lease_id(LEASES_MAX, ID_MAX);
    let (one, two, three) = (
        lease_id(7, ID_MAX),
        lease_id(8, ID_MAX),
        lease_id(9, ID_MAX),
    );
    assert_eq!(
        call(c, "cc.acquire leases 1000 1h ID <id>", &new_id)[..3],
        [0, 1000, 0]
    );
    assert_eq!(value(c, "leases").len(), LEASES_MAX_BYTES);
    assert_eq!(lease_count(&value(c, "leases")), LEASES_MAX);
    // Refused: one more, and with the limit lowered (the lease that must
    // expire is then the 501st earliest).
    assert_eq!(call(c, "cc.acquire leases 1000 1h", b"")[..3], [1, 1000, 0]);
    assert_eq!(call(c, "cc.acquire leases 500 1h", b"")[..3], [1, 500, 0]);
    // An id that holds a lease renews it, whatever the count.
    assert_eq!(
        call(c, "cc.acquire leases 1000 2h ID <id>", &one)[..3],
        [0, 1000, 0]
    );
    assert_eq!(call(c, "cc.renew leases <id> 2h", &two), [1]);
    assert_eq!(call(c, "cc.peek leases 1000", b"")[..3], [0, 1000, 0]);
    assert_eq!(call(c, "cc.release leases <id>", &three), [1]);
    assert_eq!(lease_count(&value(c, "leases")), LEASES_MAX - 1);
    assert_eq!(call(c, "cc.peek leases 1000", b"")[..3], [0, 1000, 1]);
}

#[test]
fn limits_above_the_caps_are_refused_word_for_word() {
    let (_s, mut c, t) = plain_server();
    let c = &mut c;
    let long = "i".repeat(ID_MAX + 1);
    let with_long = format!("cc.acquire a 5 30 ID {long}");
    let refused = [
        ("cc.acquire a 1001 30", BIG_LEASES),
        (with_long.as_str(), LONG_ID),
        ("cc.acquire a 1001 30 ID x", BIG_LEASES),
        ("cc.peek a 1001", BIG_LEASES),
    ];
    for (line, want) in refused {
        assert_eq!(t.call(c, &words(line)), Err(want.to_string()), "{line}");
    }
    let written: i64 = redis::cmd("EXISTS").arg(&["a", "b", "c"]).query(c).unwrap();
    assert_eq!(written, 0, "a refused call wrote");
    // A longer id holds no lease of the twin: releasing or renewing it
    // answers 0, as for any id without one.
    for line in [
        format!("cc.release a {long}"),
        format!("cc.renew a {long} 30"),
    ] {
        assert_eq!(t.call(c, &words(&line)), Ok(Value::Int(0)), "{line}");
    }
    // At the caps, and an APPROX window (a fixed size at any limit).
    let with_longest = format!("cc.acquire e 5 30 ID {}", "i".repeat(ID_MAX));
    for line in [
        with_longest.as_str(),
        "cc.acquire a 1000 30",
        "cc.peek a 1000",
        "sw.allow b 10000 60",
        "sw.allow d 10001 60 APPROX",
        "cl.throttleall 2 c b GCRA 1 1 1 SW 10000 60",
        // A limit above the log's cap: requests of a large cost take one
        // entry each (a log past the cap is refused when next read).
        "sw.allow f 1000000 60 999999",
        "sw.peek f 1000000 60",
        "sw.refund f 1000000 60 1",
    ] {
        let r = t.call(c, &words(line));
        assert!(matches!(r, Ok(Value::Array(_))), "{line}: {r:?}");
    }
}

#[test]
fn states_beyond_the_caps_are_refused_reading_no_more_than_the_largest_accepted() {
    let (s, mut c, t) = plain_server();
    let c = &mut c;
    // Logs and lease strings an older library (no caps) left, and a
    // user's long string. SW.ALLOW's flat path (functions/src/fast.lua)
    // reads the prefix too before the layered path refuses: twice.
    let log_bound = 2 * (LOG_MAX_BYTES + 1);
    for n in [LOG_MAX + 1, 1_000_000] {
        put(c, "log", &log_state(n));
        for line in [
            "sw.allow log 100 1h",
            "sw.peek log 100 1h",
            "sw.refund log 100 1h 1",
            "cl.throttleall 1 log SW 100 1h",
        ] {
            let r = bounded(&s, c, &t, "log", &words(line), log_bound);
            assert_eq!(r, Err(LOG_TOO_BIG.to_string()), "{line} on {n}");
        }
        assert_eq!(value(c, "log").len(), 11 + n * 16, "a refusal wrote");
    }
    for (n, id_len) in [(LEASES_MAX + 1, 16), (100_000, 16), (LEASES_MAX, 1024)] {
        put(c, "leases", &lease_state(n, id_len));
        let id = lease_id(7, id_len);
        for line in [
            "cc.acquire leases 5 30",
            "cc.acquire leases 5 30 ID <id>",
            "cc.release leases <id>",
            "cc.renew leases <id> 30",
            "cc.peek leases 5",
        ] {
            let w = call_words(line, &id);
            if line.contains("ID") && id_len > ID_MAX {
                // Refused for the id before the key is read.
                assert_eq!(t.call(c, &w), Err(LONG_ID.to_string()), "{line}");
                continue;
            }
            let r = bounded(&s, c, &t, "leases", &w, LEASES_MAX_BYTES + 1);
            assert_eq!(r, Err(TOO_MANY_LEASES.to_string()), "{line} on {n}");
        }
        assert_eq!(lease_count(&value(c, "leases")), n, "a refusal wrote");
    }
    put(c, "text", &vec![b'x'; 4 * LEASES_MAX_BYTES]);
    for (line, bound) in [
        ("sw.allow text 100 1h", log_bound),
        ("cc.acquire text 5 30", LEASES_MAX_BYTES + 1),
    ] {
        let r = bounded(&s, c, &t, "text", &words(line), bound);
        assert_eq!(r, Err(WRONG_TYPE.to_string()), "{line}");
    }
}
