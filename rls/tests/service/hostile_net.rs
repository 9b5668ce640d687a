//! The service against idle sockets, bad config files, many stats values
//! and malformed `/json` bodies: it keeps serving, with the last good
//! configuration, bounded descriptors and bounded stats.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::*;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::google::protobuf::UInt64Value;

const ONE: &str =
    "domain: net\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1}\n";

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// `n` connections that send nothing.
fn idle_connections(port: u16, n: usize) -> Vec<TcpStream> {
    (0..n)
        .map(|_| {
            let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
            s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
            s
        })
        .collect()
}

/// Waits until the service has closed every one of `conns` (a read answers
/// end of stream or a reset).
fn wait_all_closed(what: &str, conns: &mut [TcpStream], within: Duration) {
    let mut open: Vec<&mut TcpStream> = conns.iter_mut().collect();
    let start = Instant::now();
    let mut buf = [0u8; 64];
    while !open.is_empty() {
        assert!(
            start.elapsed() < within,
            "{what}: {} connections still open after {within:?}",
            open.len()
        );
        open.retain_mut(|s| match s.read(&mut buf) {
            Ok(0) => false,
            Ok(_) => true,
            Err(e) => matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
        });
    }
}

/// The limit the service now applies to `k` in domain `net`.
async fn net_limit(rls: &Rls, k: &str) -> Option<u32> {
    let mut c = rls.client().await;
    limit_of(&call(&mut c, request("net", vec![desc(&[("k", k)])])).await)
}

/// Waits until the service holds at most `cap` more descriptors than
/// `base`: the connections past the cap are closed at once, long before
/// the idle deadline closes the rest.
fn wait_capped(rls: &Rls, base: usize, cap: usize) {
    let mut fds = 0;
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(2500) {
        fds = open_fds(rls.pid());
        if fds <= base + cap {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{fds} descriptors open, more than {base} + {cap}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_http_connections_are_capped_and_closed() {
    let redis = Redis::start();
    let rls = Rls::start(
        &redis.url(),
        &[("net.yaml", ONE)],
        &[("HTTP_MAX_CONNECTIONS", "20"), ("HTTP_READ_TIMEOUT", "3s")],
    );
    let base = open_fds(rls.pid());
    let mut idle = Vec::new();
    for port in [rls.http_port, rls.debug_port, rls.metrics_port] {
        idle.extend(idle_connections(port, 60));
    }
    wait_capped(&rls, base, 3 * 20);
    // At the cap the oldest idle connection is closed for a new one.
    assert_eq!(http_get(rls.http_port, "/healthcheck").unwrap().0, 200);
    assert!(rls
        .metrics()
        .contains("ratelimit_service_config_load_success 1"));
    wait_all_closed("idle HTTP", &mut idle, Duration::from_secs(6));
    // A request that starts and stalls is closed too.
    let mut slow = TcpStream::connect(("127.0.0.1", rls.http_port)).unwrap();
    slow.write_all(b"POST /json HTTP/1.1\r\nContent-Length: 100\r\n\r\n{")
        .unwrap();
    slow.set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    wait_all_closed(
        "a stalled body",
        std::slice::from_mut(&mut slow),
        Duration::from_secs(6),
    );
    assert_eq!(http_get(rls.http_port, "/healthcheck").unwrap().0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_grpc_connections_are_capped_and_closed() {
    not_near_hour_end();
    let redis = Redis::start();
    let rls = Rls::start(
        &redis.url(),
        &[("net.yaml", ONE)],
        &[
            ("GRPC_MAX_CONNECTIONS", "20"),
            ("GRPC_HANDSHAKE_TIMEOUT", "3s"),
            ("GRPC_MAX_CONNECTION_IDLE", "1s"),
            ("REDIS_TIMEOUT", "10s"),
        ],
    );
    let base = open_fds(rls.pid());
    let mut idle = idle_connections(rls.grpc_port, 60);
    wait_capped(&rls, base, 20);
    // A new client gets in: a connection without the preface is closed
    // for it.
    let k = unique("k");
    assert_eq!(net_limit(&rls, &k).await, Some(1));
    wait_all_closed("idle gRPC", &mut idle, Duration::from_secs(6));
    assert_eq!(net_limit(&rls, &k).await, Some(1));
    // Past its handshake (the preface and an empty SETTINGS frame), a
    // connection without a request is closed after the idle bound.
    let mut quiet = TcpStream::connect(("127.0.0.1", rls.grpc_port)).unwrap();
    quiet
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .unwrap();
    quiet
        .set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    // Before its handshake deadline (3 s).
    wait_all_closed(
        "an idle HTTP/2 connection",
        std::slice::from_mut(&mut quiet),
        Duration::from_millis(2500),
    );
    // A connection whose request outlasts the idle bound is busy, not idle.
    let mut c = rls.client().await;
    call(&mut c, request("net", vec![desc(&[("k", &k)])])).await;
    redis.cmd(&["CLIENT", "PAUSE", "2000", "ALL"]);
    let r = c
        .should_rate_limit(request("net", vec![desc(&[("k", &k)])]))
        .await;
    assert!(r.is_ok(), "a request held 2 s by Redis: {r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nofile_is_raised_to_the_hard_limit() {
    let hard: u64 = std::fs::read_to_string("/proc/self/limits")
        .unwrap()
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(4).map(str::to_string))
        .and_then(|h| h.parse().ok())
        .expect("the hard nofile limit");
    assert!(
        hard > 64,
        "a hard nofile limit of {hard} leaves nothing to test"
    );
    let soft = (hard / 2).min(1024);
    let redis = Redis::start();
    let rls = Rls::start_wrapped(
        runtime(&[("net.yaml", ONE)]),
        &redis.url(),
        &[],
        &["/usr/bin/prlimit", &format!("--nofile={soft}:{hard}"), "--"],
    );
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", rls.pid())).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let v: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(
        (v[3], v[4]),
        (hard.to_string().as_str(), hard.to_string().as_str()),
        "{line}"
    );
}

fn data_dir(rls: &Rls) -> std::path::PathBuf {
    std::fs::canonicalize(rls.root.join("current"))
        .unwrap()
        .join("config")
}

/// Puts a bad entry into the config directory and checks that the load is
/// refused, says why, and that the old config still decides; then removes
/// it and waits for the good config to load again.
async fn refused(rls: &Rls, errors: &mut u64, loads: &mut u64, why: &str, put: impl FnOnce(&Path)) {
    let dir = data_dir(rls);
    put(&dir);
    *errors += 1;
    wait_until(why, Duration::from_secs(8), || {
        rls.metric("ratelimit_service_config_load_error") == *errors
    });
    assert!(rls.log_text().contains(why), "{why}: {}", rls.log_text());
    assert_eq!(http_get(rls.http_port, "/healthcheck").unwrap().0, 200);
    assert_eq!(net_limit(rls, &unique("k")).await, Some(1), "{why}");
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.file_name().unwrap() != "net.yaml" {
            std::fs::remove_file(p).unwrap();
        }
    }
    *loads += 1;
    wait_until("the good config again", Duration::from_secs(8), || {
        rls.metric("ratelimit_service_config_load_success") == *loads
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifos_devices_deep_and_large_files_are_refused() {
    not_near_hour_end();
    let redis = Redis::start();
    let rls = Rls::start(
        &redis.url(),
        &[("net.yaml", ONE)],
        &[
            ("RUNTIME_MAX_FILE_BYTES", "4096"),
            ("RUNTIME_MAX_TOTAL_BYTES", "6000"),
            ("RUNTIME_MAX_DEPTH", "16"),
        ],
    );
    let (mut errors, mut loads) = (0, 1);
    assert_eq!(rls.metric("ratelimit_service_config_load_success"), 1);
    refused(
        &rls,
        &mut errors,
        &mut loads,
        "fifo.yaml: not a regular file (a FIFO)",
        |d| {
            let st = std::process::Command::new("mkfifo")
                .arg(d.join("fifo.yaml"))
                .status()
                .unwrap();
            assert!(st.success());
        },
    )
    .await;
    refused(
        &rls,
        &mut errors,
        &mut loads,
        "zero.yaml: not a regular file (a character device)",
        |d| {
            std::os::unix::fs::symlink("/dev/zero", d.join("zero.yaml")).unwrap();
        },
    )
    .await;
    refused(
        &rls,
        &mut errors,
        &mut loads,
        "deep.yaml: nested 1001 levels deep, more than 16 (RUNTIME_MAX_DEPTH)",
        |d| {
            let text = format!(
                "domain: deep\nmetadata: {}{}\n",
                "[".repeat(1000),
                "]".repeat(1000)
            );
            std::fs::write(d.join("deep.yaml"), text).unwrap();
        },
    )
    .await;
    refused(
        &rls,
        &mut errors,
        &mut loads,
        "big.yaml: larger than 4096 bytes (RUNTIME_MAX_FILE_BYTES)",
        |d| {
            std::fs::write(
                d.join("big.yaml"),
                format!("domain: big\n#{}\n", "x".repeat(5000)),
            )
            .unwrap();
        },
    )
    .await;
    refused(
        &rls,
        &mut errors,
        &mut loads,
        "larger than 6000 bytes together (RUNTIME_MAX_TOTAL_BYTES)",
        |d| {
            for n in ["a", "b"] {
                let text = format!("domain: {n}\n#{}\n", "x".repeat(3000));
                std::fs::write(d.join(format!("{n}.yaml")), text).unwrap();
            }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_load_times_out_and_serving_goes_on() {
    not_near_hour_end();
    let redis = Redis::start();
    let rls = Rls::start(
        &redis.url(),
        &[("net.yaml", ONE)],
        &[
            ("RUNTIME_MAX_DEPTH", "1000000"),
            ("RUNTIME_LOAD_TIMEOUT", "300ms"),
        ],
    );
    // Far past the default depth bound: the YAML parser takes seconds.
    let text = format!(
        "domain: slow\nmetadata: {}{}\n",
        "[".repeat(60_000),
        "]".repeat(60_000)
    );
    std::fs::write(data_dir(&rls).join("slow.yaml"), text).unwrap();
    wait_until("the load timeout", Duration::from_secs(5), || {
        rls.metric("ratelimit_service_config_load_error") == 1
    });
    assert!(
        rls.log_text()
            .contains("loading took longer than 300ms (RUNTIME_LOAD_TIMEOUT): refused"),
        "{}",
        rls.log_text()
    );
    assert_eq!(http_get(rls.http_port, "/healthcheck").unwrap().0, 200);
    assert_eq!(net_limit(&rls, &unique("k")).await, Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_that_keeps_size_and_mtime_reloads() {
    not_near_hour_end();
    let redis = Redis::start();
    let rls = Rls::start(&redis.url(), &[("net.yaml", ONE)], &[]);
    let k = unique("k");
    assert_eq!(net_limit(&rls, &k).await, Some(1));
    let p = data_dir(&rls).join("net.yaml");
    let before = std::fs::metadata(&p).unwrap();
    let edited = ONE.replace("requests_per_unit: 1", "requests_per_unit: 2");
    assert_eq!(edited.len(), ONE.len());
    std::fs::write(&p, &edited).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&p)
        .unwrap()
        .set_times(
            std::fs::FileTimes::new()
                .set_modified(before.modified().unwrap())
                .set_accessed(before.accessed().unwrap()),
        )
        .unwrap();
    let after = std::fs::metadata(&p).unwrap();
    assert_eq!(
        (after.len(), after.modified().unwrap()),
        (before.len(), before.modified().unwrap())
    );
    wait_until("the reload", Duration::from_secs(5), || {
        rls.metric("ratelimit_service_config_load_success") == 2
    });
    assert_eq!(net_limit(&rls, &k).await, Some(2));
}

const DETAILED: &str = "domain: det\ndescriptors:\n  - key: user\n    detailed_metric: true\n    rate_limit: {unit: hour, requests_per_unit: 100}\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_keys_stop_at_the_cap_with_an_overflow_series() {
    not_near_hour_end();
    let redis = Redis::start();
    let rls = Rls::start(
        &redis.url(),
        &[("det.yaml", DETAILED)],
        &[("STATS_MAX_KEYS", "5")],
    );
    let mut c = rls.client().await;
    let tag = unique("u");
    for i in 0..20 {
        let r = call(
            &mut c,
            request("det", vec![desc(&[("user", &format!("{tag}-{i}"))])]),
        )
        .await;
        assert_eq!(r.overall_code, OK);
    }
    for i in 0..30 {
        let r = call(
            &mut c,
            request(&format!("nowhere{i}"), vec![desc(&[("user", "x")])]),
        )
        .await;
        assert_eq!(r.overall_code, OK);
    }
    let m = rls.metrics();
    let series: Vec<&str> = m
        .lines()
        .filter(|l| l.starts_with("ratelimit_service_rate_limit_total_hits{domain=\"det\""))
        .collect();
    assert_eq!(
        series.len(),
        6,
        "five own keys and the overflow key: {series:?}"
    );
    assert_eq!(
        rls.metric("ratelimit_service_rate_limit_total_hits{domain=\"det\",key1=\"_overflow\"}"),
        15,
        "{m}"
    );
    assert_eq!(
        rls.metric("ratelimit_service_rate_limit_domain_not_found"),
        30,
        "{m}"
    );
    assert!(!m.contains("nowhere"), "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counter_at_the_top_stays_there() {
    not_near_hour_end();
    let redis = Redis::start();
    let rls = Rls::start(&redis.url(), &[("net.yaml", ONE)], &[]);
    let mut c = rls.client().await;
    let k = unique("k");
    let hits = |n: u64| {
        let mut d = desc(&[("k", &k)]);
        d.hits_addend = Some(UInt64Value { value: n });
        request("net", vec![d])
    };
    for n in [i64::MAX as u64, i64::MAX as u64, 1, u64::MAX, 1] {
        c.should_rate_limit(hits(n))
            .await
            .unwrap_or_else(|e| panic!("hits {n}: {e:?}"));
    }
    // A rule without a value: one series for every value of `k`.
    let key = "ratelimit_service_rate_limit_total_hits{domain=\"net\",key1=\"k\"}";
    assert_eq!(rls.metric(key), u64::MAX, "{}", rls.metrics());
    // The same limit still answers for everyone.
    let r = call(&mut c, request("net", vec![desc(&[("k", &unique("k"))])])).await;
    assert_eq!(r.overall_code, OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_hits_out_of_range_are_refused() {
    not_near_hour_end();
    let redis = Redis::start();
    let ten = ONE.replace("requests_per_unit: 1", "requests_per_unit: 10");
    let rls = Rls::start(&redis.url(), &[("net.yaml", &ten)], &[]);
    let k = unique("k");
    let body = |hits: &str| {
        format!(
            r#"{{"domain":"net","descriptors":[{{"entries":[{{"key":"k","value":"{k}"}}]}}],"hitsAddend":{hits}}}"#
        )
    };
    for (hits, why) in [
        (
            "-1",
            "hitsAddend: -1 is not an integer from 0 to 4294967295",
        ),
        (
            "4294967296",
            "hitsAddend: 4294967296 is not an integer from 0 to 4294967295",
        ),
        (
            "2.5",
            "hitsAddend: 2.5 is not an integer from 0 to 4294967295",
        ),
    ] {
        let (code, text) = http_post_json(rls.http_port, &body(hits)).unwrap();
        assert_eq!(code, 400, "{hits}: {text}");
        assert!(text.contains(why), "{hits}: {text}");
    }
    // Nothing was counted by the refused ones.
    let (code, text) = http_post_json(rls.http_port, &body("\"3\"")).unwrap();
    assert_eq!(code, 200, "{text}");
    assert!(text.contains("\"limitRemaining\":7"), "{text}");
    // A descriptor's own hits are a uint64, as over gRPC.
    let d = format!(
        r#"{{"domain":"net","descriptors":[{{"entries":[{{"key":"k","value":"{k}"}}],"hitsAddend":"2"}}]}}"#
    );
    let (code, text) = http_post_json(rls.http_port, &d).unwrap();
    assert_eq!(code, 200, "{text}");
    assert!(text.contains("\"limitRemaining\":5"), "{text}");
}

/// A gRPC connection with one request whose body never comes: the
/// preface, an empty SETTINGS frame and a HEADERS frame without
/// END_STREAM (HPACK literals, no Huffman).
fn stalled_stream(port: u16) -> TcpStream {
    fn lit(out: &mut Vec<u8>, v: &str) {
        out.push(u8::try_from(v.len()).expect("short value"));
        out.extend_from_slice(v.as_bytes());
    }
    let mut block = vec![0x83, 0x86]; // :method POST, :scheme http
    block.push(0x04); // :path, not indexed
    lit(
        &mut block,
        "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
    );
    block.push(0x01); // :authority
    lit(&mut block, "127.0.0.1");
    block.extend_from_slice(&[0x0f, 0x10]); // content-type
    lit(&mut block, "application/grpc");
    block.push(0x00);
    lit(&mut block, "te");
    lit(&mut block, "trailers");
    let mut bytes = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0".to_vec();
    let len = u32::try_from(block.len()).unwrap().to_be_bytes();
    // HEADERS, END_HEADERS, stream 1.
    bytes.extend_from_slice(&[len[1], len[2], len[3], 0x01, 0x04, 0, 0, 0, 1]);
    bytes.extend_from_slice(&block);
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.write_all(&bytes).unwrap();
    // The server's SETTINGS: it has read the preface, and the HEADERS that
    // came with it.
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 9];
    s.read_exact(&mut buf).expect("the server's SETTINGS");
    s
}

/// Requests that never send their body make their connections busy:
/// they end at `GRPC_REQUEST_TIMEOUT`, so the cap never locks clients out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_without_a_body_end_and_free_the_cap() {
    not_near_hour_end();
    let redis = Redis::start();
    let rls = Rls::start(
        &redis.url(),
        &[("net.yaml", ONE)],
        &[
            ("GRPC_MAX_CONNECTIONS", "3"),
            ("GRPC_REQUEST_TIMEOUT", "2s"),
            ("GRPC_MAX_CONNECTION_IDLE", "1h"),
        ],
    );
    let _stalled: Vec<TcpStream> = (0..3).map(|_| stalled_stream(rls.grpc_port)).collect();
    // Time for the requests to reach the service (they make their
    // connections busy; a new one would otherwise close an idle one).
    std::thread::sleep(Duration::from_millis(300));
    let k = unique("k");
    let start = Instant::now();
    loop {
        let got = tokio::time::timeout(Duration::from_secs(2), async {
            let mut c =
                RateLimitServiceClient::connect(format!("http://127.0.0.1:{}", rls.grpc_port))
                    .await
                    .ok()?;
            c.should_rate_limit(request("net", vec![desc(&[("k", &k)])]))
                .await
                .ok()
        })
        .await;
        if let Ok(Some(r)) = got {
            assert_eq!(r.into_inner().overall_code, OK);
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "no gRPC call got in past three stalled requests"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// stderr a pipe nobody reads any more (a log collector that went away):
/// every log line fails with EPIPE. The service starts, serves, reloads and
/// logs on, dropping the lines it cannot write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_stderr_never_stops_the_service() {
    not_near_hour_end();
    let redis = Redis::start();
    let dead_stderr = "import os, sys\n\
        r, w = os.pipe()\n\
        os.close(r)\n\
        os.dup2(w, 2)\n\
        os.execv(sys.argv[1], sys.argv[1:])\n";
    let rls = Rls::start_wrapped(
        runtime(&[("net.yaml", ONE)]),
        &redis.url(),
        &[("LOG_LEVEL", "DEBUG")],
        &["/usr/bin/python3", "-c", dead_stderr],
    );
    let k = unique("k");
    assert_eq!(net_limit(&rls, &k).await, Some(1));
    // A refused load (logged), then a good one: the watcher lives on.
    let dir = data_dir(&rls);
    std::fs::write(dir.join("bad.yaml"), "domain: [\n").unwrap();
    wait_until("the load error", Duration::from_secs(8), || {
        rls.metric("ratelimit_service_config_load_error") == 1
    });
    std::fs::write(
        dir.join("bad.yaml"),
        "domain: two\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 2}\n",
    )
    .unwrap();
    wait_until("the reload", Duration::from_secs(8), || {
        rls.metric("ratelimit_service_config_load_success") == 2
    });
    assert_eq!(net_limit(&rls, &k).await, Some(1));
    assert_eq!(http_get(rls.http_port, "/healthcheck").unwrap().0, 200);
}
