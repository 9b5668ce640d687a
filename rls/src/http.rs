//! The HTTP endpoints: `/healthcheck` and `/json` (port 8080), `/rlconfig`
//! and `/stats` (debug port 6070), `/metrics` (Prometheus). A minimal
//! HTTP/1.1 server: one request per connection.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::{
    rate_limit_descriptor, RateLimitDescriptor,
};
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::google::protobuf::UInt64Value;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::net;
use crate::service::State;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Site {
    Main,
    Debug,
    Metrics,
}

pub struct Http {
    pub state: Arc<State>,
    pub healthy: Arc<AtomicBool>,
}

pub async fn serve(listener: TcpListener, site: Site, http: Arc<Http>, cap: usize) {
    let name = match site {
        Site::Main => "http",
        Site::Debug => "debug http",
        Site::Metrics => "metrics http",
    };
    let limiter = net::Limiter::new(name, cap);
    net::accept_loop(listener, limiter, move |stream, slot| {
        let http = http.clone();
        tokio::spawn(async move {
            let _ = handle(stream, slot, site, &http).await;
        });
    })
    .await
}

/// A request as read from its connection.
enum Read {
    /// Closed before a whole request came.
    Closed,
    TooLarge,
    Request {
        method: String,
        path: String,
        body: Vec<u8>,
    },
}

async fn read_request(s: &mut TcpStream) -> std::io::Result<Read> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let header_end = loop {
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            return Ok(Read::Closed);
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > 64 * 1024 {
            return Ok(Read::TooLarge);
        }
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split(' ');
    let method = first.next().unwrap_or_default().to_string();
    let path = first.next().unwrap_or_default().to_string();
    let len: usize = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0)
        .min(1 << 20);
    let mut body = buf[header_end..].to_vec();
    while body.len() < len {
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    let path = path.split('?').next().unwrap_or_default().to_string();
    Ok(Read::Request { method, path, body })
}

/// One connection: its request must come within `HTTP_READ_TIMEOUT` of the
/// accept, and its answer go out within `HTTP_WRITE_TIMEOUT` after that.
async fn handle(
    mut s: TcpStream,
    mut slot: net::Slot,
    site: Site,
    http: &Http,
) -> std::io::Result<()> {
    let settings = &http.state.settings;
    let read = tokio::select! {
        r = tokio::time::timeout(settings.http_read_timeout, read_request(&mut s)) => r,
        _ = &mut slot.evicted => return Ok(()),
    };
    let request = match read {
        Err(_) | Ok(Ok(Read::Closed)) => return Ok(()),
        Ok(Err(e)) => return Err(e),
        Ok(Ok(r)) => r,
    };
    let _busy = slot.state.begin();
    let answer = async {
        match request {
            Read::Request { method, path, body } => {
                route(&mut s, site, http, &method, &path, &body).await
            }
            _ => respond(&mut s, 431, "text/plain", "headers too large\n").await,
        }
    };
    tokio::time::timeout(settings.http_write_timeout, answer)
        .await
        .unwrap_or(Ok(()))
}

async fn route(
    s: &mut TcpStream,
    site: Site,
    http: &Http,
    method: &str,
    path: &str,
    body: &[u8],
) -> std::io::Result<()> {
    let st = &http.state;
    match (site, method, path) {
        (Site::Main, _, "/healthcheck") => {
            // Unhealthy while Redis cannot run the commands (no module):
            // the log says what to load and where.
            if http.healthy.load(Ordering::Relaxed) && st.module_problem().is_none() {
                respond(s, 200, "text/plain", "OK").await
            } else {
                respond(s, 500, "text/plain", "NOT OK").await
            }
        }
        (Site::Main, "POST", "/json") => {
            let (code, text) = json_endpoint(st, body).await;
            respond(s, code, "application/json", &text).await
        }
        (Site::Debug, _, "/rlconfig") => {
            // A large configuration takes a while to list and sort: off
            // the threads that answer requests, as the exposition.
            let config = st.current_config();
            let dump =
                tokio::task::spawn_blocking(move || config.map(|c| c.dump()).unwrap_or_default())
                    .await
                    .unwrap_or_default();
            respond(s, 200, "text/plain", &dump).await
        }
        (Site::Debug, _, "/stats") => {
            let text = exposition(st).await;
            respond(s, 200, "text/plain", &text).await
        }
        (Site::Metrics, _, p) if p == st.settings.prometheus_path => {
            let text = exposition(st).await;
            respond(s, 200, "text/plain; version=0.0.4", &text).await
        }
        _ => respond(s, 404, "text/plain", "404 page not found\n").await,
    }
}

/// Formatting many series takes a while: off the threads that answer
/// requests.
async fn exposition(st: &Arc<State>) -> String {
    let st = st.clone();
    tokio::task::spawn_blocking(move || st.stats.prometheus())
        .await
        .unwrap_or_default()
}

async fn respond(s: &mut TcpStream, code: u16, ctype: &str, body: &str) -> std::io::Result<()> {
    let reason = match code {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        431 => "Request Header Fields Too Large",
        _ => "Internal Server Error",
    };
    let head = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await?;
    s.write_all(body.as_bytes()).await?;
    s.shutdown().await
}

/// A proto3 JSON unsigned integer (a number or a decimal string, as
/// protojson takes it) no larger than `max`.
fn json_uint(v: &Value, name: &str, max: u64) -> Result<Option<u64>, String> {
    let bad = || format!("{name}: {v} is not an integer from 0 to {max}");
    match v {
        Value::Null => Ok(None),
        Value::Number(n) => n.as_u64().filter(|&h| h <= max).map(Some).ok_or_else(bad),
        Value::String(t) => t
            .parse::<u64>()
            .ok()
            .filter(|&h| h <= max)
            .map(Some)
            .ok_or_else(bad),
        _ => Err(bad()),
    }
}

fn field<'a>(v: &'a Value, camel: &str, snake: &str) -> &'a Value {
    v.get(camel)
        .or_else(|| v.get(snake))
        .unwrap_or(&Value::Null)
}

fn json_str(v: &Value, name: &str) -> Result<String, String> {
    match v {
        Value::Null => Ok(String::new()),
        Value::String(t) => Ok(t.clone()),
        _ => Err(format!("{name}: {v} is not a string")),
    }
}

/// The `RateLimitRequest` a `/json` body names, or why it names none.
/// `hitsAddend` is a uint32 as in the proto (the reference answers 400 for
/// a value out of range); a descriptor's `hitsAddend` is a uint64.
pub fn parse_json_request(body: &[u8]) -> Result<RateLimitRequest, String> {
    let v = serde_json::from_slice::<Value>(body).map_err(|e| format!("invalid JSON: {e}"))?;
    if !v.is_object() {
        return Err("the request must be a JSON object".into());
    }
    let mut descriptors = Vec::new();
    match &v["descriptors"] {
        Value::Null => {}
        Value::Array(ds) => {
            for (i, d) in ds.iter().enumerate() {
                let mut entries = Vec::new();
                match &d["entries"] {
                    Value::Null => {}
                    Value::Array(es) => {
                        for (j, e) in es.iter().enumerate() {
                            entries.push(rate_limit_descriptor::Entry {
                                key: json_str(
                                    &e["key"],
                                    &format!("descriptors[{i}].entries[{j}].key"),
                                )?,
                                value: json_str(
                                    &e["value"],
                                    &format!("descriptors[{i}].entries[{j}].value"),
                                )?,
                            });
                        }
                    }
                    other => {
                        return Err(format!("descriptors[{i}].entries: {other} is not a list"))
                    }
                }
                let hits = json_uint(
                    field(d, "hitsAddend", "hits_addend"),
                    &format!("descriptors[{i}].hitsAddend"),
                    u64::MAX,
                )?;
                let negative = match field(d, "isNegativeHits", "is_negative_hits") {
                    Value::Null => false,
                    Value::Bool(b) => *b,
                    other => {
                        return Err(format!(
                            "descriptors[{i}].isNegativeHits: {other} is not a boolean"
                        ))
                    }
                };
                descriptors.push(RateLimitDescriptor {
                    entries,
                    hits_addend: hits.map(|value| UInt64Value { value }),
                    is_negative_hits: negative,
                    ..Default::default()
                });
            }
        }
        other => return Err(format!("descriptors: {other} is not a list")),
    }
    let hits = json_uint(
        field(&v, "hitsAddend", "hits_addend"),
        "hitsAddend",
        u64::from(u32::MAX),
    )?;
    Ok(RateLimitRequest {
        domain: json_str(&v["domain"], "domain")?,
        descriptors,
        hits_addend: hits.and_then(|h| u32::try_from(h).ok()).unwrap_or(0),
    })
}

/// `/json`: a `RateLimitRequest` in proto3 JSON, answered in proto3 JSON
/// (as the reference's endpoint for testing by hand).
async fn json_endpoint(st: &Arc<State>, body: &[u8]) -> (u16, String) {
    let req = match parse_json_request(body) {
        Ok(r) => r,
        Err(e) => return (400, json!({ "error": e }).to_string()),
    };
    match st.decide_detached(req).await {
        Err(f) => (500, json!({"error": f.message}).to_string()),
        Ok(resp) => {
            // As the reference's handler: a span of its own (no parent).
            let mut span = crate::trace::child(
                "NewJsonHandler Remaining Execution",
                crate::trace::Scope::Server,
            );
            if span.recording() {
                span.set_str("response", crate::trace::text::response(&resp));
            }
            let code = |c: i32| match c {
                1 => "OK",
                2 => "OVER_LIMIT",
                _ => "UNKNOWN",
            };
            let statuses: Vec<Value> = resp
                .statuses
                .iter()
                .map(|s| {
                    let mut o = json!({"code": code(s.code), "limitRemaining": s.limit_remaining});
                    if let Some(l) = &s.current_limit {
                        o["currentLimit"] = json!({
                            "requestsPerUnit": l.requests_per_unit,
                            "unit": crate::config::Unit::from_proto(l.unit).map(|u| u.name()).unwrap_or("UNKNOWN"),
                        });
                    }
                    if let Some(d) = &s.duration_until_reset {
                        o["durationUntilReset"] = json!(format!("{}s", d.seconds));
                    }
                    o
                })
                .collect();
            let code = if resp.overall_code == 2 { 429 } else { 200 };
            let mut out = json!({"overallCode": if code == 429 {"OVER_LIMIT"} else {"OK"}, "statuses": statuses});
            if let Some(m) = &resp.dynamic_metadata {
                out["dynamicMetadata"] = crate::metadata::struct_to_json(m);
            }
            (code, out.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_json_request as parse;

    #[test]
    fn json_hits_are_integers_in_the_protos_range() {
        let r = parse(
            br#"{"domain":"d","descriptors":[{"entries":[{"key":"k"}]}],"hitsAddend":4294967295}"#,
        )
        .unwrap();
        assert_eq!(r.hits_addend, u32::MAX);
        assert_eq!(
            parse(br#"{"domain":"d","hitsAddend":"7"}"#)
                .unwrap()
                .hits_addend,
            7
        );
        assert_eq!(parse(br#"{"domain":"d"}"#).unwrap().hits_addend, 0);
        for (body, why) in [
            (
                r#"{"hitsAddend":4294967296}"#,
                "hitsAddend: 4294967296 is not an integer from 0 to 4294967295",
            ),
            (
                r#"{"hitsAddend":-1}"#,
                "hitsAddend: -1 is not an integer from 0 to 4294967295",
            ),
            (
                r#"{"hitsAddend":1.5}"#,
                "hitsAddend: 1.5 is not an integer from 0 to 4294967295",
            ),
            (
                r#"{"hitsAddend":"x"}"#,
                "hitsAddend: \"x\" is not an integer from 0 to 4294967295",
            ),
            (r#"{"domain":5}"#, "domain: 5 is not a string"),
            (
                r#"{"descriptors":[{"entries":[{"key":1}]}]}"#,
                "descriptors[0].entries[0].key: 1 is not a string",
            ),
            (
                r#"{"descriptors":[{"hitsAddend":-3}]}"#,
                "descriptors[0].hitsAddend: -3 is not an integer from 0 to 18446744073709551615",
            ),
            (r#"[1]"#, "the request must be a JSON object"),
        ] {
            assert_eq!(parse(body.as_bytes()).unwrap_err(), why, "{body}");
        }
        let r = parse(br#"{"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}],"hitsAddend":"18446744073709551615","isNegativeHits":true}]}"#).unwrap();
        let d = &r.descriptors[0];
        assert_eq!(d.hits_addend.as_ref().map(|h| h.value), Some(u64::MAX));
        assert!(d.is_negative_hits);
        assert_eq!(
            (d.entries[0].key.as_str(), d.entries[0].value.as_str()),
            ("k", "v")
        );
    }
}
