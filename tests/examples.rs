//! The client examples run against a real server, so they cannot rot.

mod support;
use support::*;

#[path = "../examples/rust_headers.rs"]
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

#[test]
fn python_example_sends_429_with_retry_after() {
    let s = Server::start();
    let out = std::process::Command::new("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/python_headers.py"
        ))
        .arg("bob")
        .env("REDIS_URL", format!("redis://127.0.0.1:{}", s.port))
        // scripts/deps installs redis-py there.
        .env(
            "PYTHONPATH",
            concat!(env!("CARGO_MANIFEST_DIR"), "/target/deps/python"),
        )
        .output()
        .expect("python3 is needed to run the Python example");
    assert!(
        out.status.success(),
        "python example failed (redis-py comes from scripts/deps): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 18);
    assert_eq!(
        lines[0],
        "200 RateLimit-Limit: 16 RateLimit-Remaining: 15 RateLimit-Reset: 4"
    );
    assert_eq!(
        lines[17],
        "429 RateLimit-Limit: 16 RateLimit-Remaining: 0 RateLimit-Reset: 64 Retry-After: 4"
    );
}
