//! The HTTP endpoints: `/healthcheck` and `/json` (port 8080), `/rlconfig`
//! and `/stats` (debug port 6070), `/metrics` (Prometheus). A minimal
//! HTTP/1.1 server: one request per connection.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::{
    rate_limit_descriptor, RateLimitDescriptor,
};
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

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

pub async fn serve(listener: TcpListener, site: Site, http: Arc<Http>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let http = http.clone();
        tokio::spawn(async move {
            let _ = handle(stream, site, &http).await;
        });
    }
}

async fn handle(mut s: TcpStream, site: Site, http: &Http) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let header_end = loop {
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > 64 * 1024 {
            return respond(&mut s, 431, "text/plain", "headers too large\n").await;
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
    let st = &http.state;
    match (site, method.as_str(), path.as_str()) {
        (Site::Main, _, "/healthcheck") => {
            if http.healthy.load(Ordering::Relaxed) {
                respond(&mut s, 200, "text/plain", "OK").await
            } else {
                respond(&mut s, 500, "text/plain", "NOT OK").await
            }
        }
        (Site::Main, "POST", "/json") => {
            let (code, text) = json_endpoint(st, &body).await;
            respond(&mut s, code, "application/json", &text).await
        }
        (Site::Debug, _, "/rlconfig") => {
            let dump = st.current_config().map(|c| c.dump()).unwrap_or_default();
            respond(&mut s, 200, "text/plain", &dump).await
        }
        (Site::Debug, _, "/stats") => {
            let text = st.stats.prometheus();
            respond(&mut s, 200, "text/plain", &text).await
        }
        (Site::Metrics, _, p) if p == st.settings.prometheus_path => {
            let text = st.stats.prometheus();
            respond(&mut s, 200, "text/plain; version=0.0.4", &text).await
        }
        _ => respond(&mut s, 404, "text/plain", "404 page not found\n").await,
    }
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

/// `/json`: a `RateLimitRequest` in proto3 JSON, answered in proto3 JSON
/// (as the reference's endpoint for testing by hand).
async fn json_endpoint(st: &State, body: &[u8]) -> (u16, String) {
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return (400, "{\"error\":\"invalid JSON\"}".into());
    };
    let descriptors = v["descriptors"]
        .as_array()
        .map(|ds| {
            ds.iter()
                .map(|d| RateLimitDescriptor {
                    entries: d["entries"]
                        .as_array()
                        .map(|es| {
                            es.iter()
                                .map(|e| rate_limit_descriptor::Entry {
                                    key: e["key"].as_str().unwrap_or_default().into(),
                                    value: e["value"].as_str().unwrap_or_default().into(),
                                })
                                .collect()
                        })
                        .unwrap_or_default(),
                    ..Default::default()
                })
                .collect()
        })
        .unwrap_or_default();
    let req = RateLimitRequest {
        domain: v["domain"].as_str().unwrap_or_default().into(),
        descriptors,
        hits_addend: v["hitsAddend"]
            .as_u64()
            .or_else(|| v["hits_addend"].as_u64())
            .and_then(|h| u32::try_from(h).ok())
            .unwrap_or(0),
    };
    match st.should_rate_limit(&req).await {
        Err(f) => (500, json!({"error": f.message}).to_string()),
        Ok(resp) => {
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
            (
                code,
                json!({"overallCode": if code == 429 {"OVER_LIMIT"} else {"OK"}, "statuses": statuses}).to_string(),
            )
        }
    }
}
