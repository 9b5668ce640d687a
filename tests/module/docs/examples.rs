//! The client examples run against a real server, so they cannot rot.

use crate::support::*;

#[path = "../../../examples/rust_headers.rs"]
mod rust_headers;

#[test]
fn rust_example_sends_429_with_retry_after() {
    let s = Server::start();
    let c = &mut s.conn();
    let answers: Vec<_> = (0..18)
        .map(|_| rust_headers::throttle(c, "alice").unwrap())
        .collect();
    assert!(answers[..16].iter().all(|a| a.status == 200));
    let first: Vec<String> = answers[0]
        .headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect();
    assert_eq!(
        first,
        [
            "RateLimit-Limit: 16",
            "RateLimit-Remaining: 15",
            "RateLimit-Reset: 4"
        ]
    );
    let last = &answers[17];
    assert_eq!(last.status, 429);
    let headers: Vec<String> = last
        .headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect();
    assert_eq!(
        headers,
        [
            "RateLimit-Limit: 16",
            "RateLimit-Remaining: 0",
            "RateLimit-Reset: 64",
            "Retry-After: 4"
        ]
    );
}

/// The servers the Python and Node.js examples run on: one with the module, and one
/// without it, where the example's helper uses the Functions twin.
fn python_servers() -> [Server; 2] {
    [
        Server::start(),
        Server::with(Options {
            without_module: true,
            ..Options::default()
        }),
    ]
}

/// The last of the 18 answers a headers example prints for a new user.
const REFUSED: &str =
    "429 RateLimit-Limit: 16 RateLimit-Remaining: 0 RateLimit-Reset: 64 Retry-After: 4";

/// What a headers example prints for a new user: 18 answers, the first
/// allowed with 15 left, the last refused.
fn assert_headers_example(lines: &[String]) {
    assert_eq!(lines.len(), 18);
    assert_eq!(
        lines[0],
        "200 RateLimit-Limit: 16 RateLimit-Remaining: 15 RateLimit-Reset: 4"
    );
    assert_eq!(lines[17], REFUSED);
}

#[test]
fn python_example_sends_429_with_retry_after() {
    for s in python_servers() {
        assert_headers_example(&python(&s, "bob", "headers"));
    }
}

#[test]
fn python_helper_uses_the_twin_only_without_the_module() {
    let [module, plain] = python_servers();
    python(&module, "carl", "headers");
    python(&plain, "carl", "headers");
    let loaded = |s: &Server| -> bool {
        let c = &mut s.conn();
        if server_version().has_7_0() {
            let libs = cmd(c, "FUNCTION LIST LIBRARYNAME redis_cell").unwrap();
            libs != Value::Array(vec![])
        } else {
            let scripts = cmd(c, "INFO memory").unwrap();
            !format!("{scripts:?}").contains("number_of_cached_scripts:0")
        }
    };
    assert!(!loaded(&module), "the module's server needs no twin");
    assert!(
        loaded(&plain),
        "the server without the module runs the twin"
    );
    let c = &mut plain.conn();
    assert_eq!(
        get(c, "rl:carl").map(|tat| tat.len()),
        Some(19),
        "the twin keeps a TAT"
    );
}

fn python(s: &Server, user: &str, mode: &str) -> Vec<String> {
    let out = std::process::Command::new("python3")
        .arg(concat!(root!(), "/examples/python_headers.py"))
        .arg(user)
        .arg(mode)
        .env("REDIS_URL", format!("redis://127.0.0.1:{}", s.port))
        .env(
            "PYTHONPATH",
            // redis-py and the redis-cell package built from this
            // checkout, as scripts/deps installs them.
            concat!(
                root!(),
                "/target/deps/python:",
                root!(),
                "/target/deps/python-cell"
            ),
        )
        .output()
        .expect("python3 is needed to run the Python example");
    output_lines(out, "python example failed")
}

const SEC_POLICY: &str = "RateLimit-Policy: 5;w=1";
const DAY_POLICY: &str = "RateLimit-Policy: 8;w=86400";

/// The lines both tiered examples must print: five allowed by the
/// per-second bucket, then refused by it; two seconds later the daily
/// quota binds, then refuses until the end of the day (6,398 s away).
fn tiered_expectations() -> (Vec<String>, Vec<String>) {
    let sec = |rem: i64| {
        format!("200 RateLimit-Limit: 5 RateLimit-Remaining: {rem} RateLimit-Reset: 1 {SEC_POLICY}")
    };
    let mut first: Vec<String> = (0..5).rev().map(sec).collect();
    for _ in 0..2 {
        first.push(format!("429 RateLimit-Limit: 5 RateLimit-Remaining: 0 RateLimit-Reset: 1 {SEC_POLICY} Retry-After: 1"));
    }
    let day = |rem: i64| {
        format!(
            "200 RateLimit-Limit: 8 RateLimit-Remaining: {rem} RateLimit-Reset: 6398 {DAY_POLICY}"
        )
    };
    let mut second: Vec<String> = (0..3).rev().map(day).collect();
    for _ in 0..4 {
        second.push(format!("429 RateLimit-Limit: 8 RateLimit-Remaining: 0 RateLimit-Reset: 6398 {DAY_POLICY} Retry-After: 6398"));
    }
    (first, second)
}

#[test]
fn tiered_examples_map_the_binding_limit_to_headers() {
    let (first, second) = tiered_expectations();
    let [s, plain] = python_servers();
    assert_eq!(python(&plain, "ann", "tiered"), first);
    plain.set_time(T0 + 2 * SEC);
    assert_eq!(python(&plain, "ann", "tiered"), second);
    assert_eq!(python(&s, "ann", "tiered"), first);
    let c = &mut s.conn();
    let rust = |c: &mut redis::Connection| -> Vec<String> {
        (0..7)
            .map(|_| {
                let a = rust_headers::throttle_tiered(c, "ben").unwrap();
                let h: Vec<String> = a.headers.iter().map(|(k, v)| format!("{k}: {v}")).collect();
                format!("{} {}", a.status, h.join(" "))
            })
            .collect()
    };
    assert_eq!(rust(c), first);
    s.set_time(T0 + 2 * SEC);
    assert_eq!(python(&s, "ann", "tiered"), second);
    assert_eq!(rust(c), second);
}

#[test]
fn worker_examples_wait_for_their_slot() {
    let [s, plain] = python_servers();
    let expected: Vec<String> = (0..10)
        .map(|i| format!("waited {} ms, got response {i}", i * 10))
        .collect();
    assert_eq!(python(&plain, "api1", "worker"), expected);
    assert_eq!(python(&s, "api1", "worker"), expected);
    let c = &mut s.conn();
    let rust: Vec<String> = (0..10)
        .map(|i| {
            let (waited, got) =
                rust_headers::call_when_allowed(c, "api2", || format!("response {i}"))
                    .unwrap()
                    .expect("a slot within a second");
            format!("waited {waited} ms, got {got}")
        })
        .collect();
    assert_eq!(rust, expected);
}

fn node(s: &Server, user: &str) -> Vec<String> {
    let out = std::process::Command::new("node")
        .arg(concat!(root!(), "/examples/node_headers.mjs"))
        .arg(user)
        .env("REDIS_URL", format!("redis://127.0.0.1:{}", s.port))
        .output()
        .expect("node is needed to run the Node.js example (scripts/deps installs it)");
    output_lines(out, "node example failed (scripts/deps installs ioredis)")
}

/// The lines an example printed, once it succeeded.
fn output_lines(out: std::process::Output, failed: &str) -> Vec<String> {
    assert!(
        out.status.success(),
        "{failed}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

#[test]
fn node_example_sends_429_with_retry_after_with_or_without_the_module() {
    for s in python_servers() {
        assert_headers_example(&node(&s, "dora"));
        // The same key as the Python example's, in either engine.
        assert_eq!(python(&s, "dora", "headers")[0], REFUSED);
    }
}
