//! Tracing's settings: the reference's `TRACING_*` variables
//! (envoyproxy/ratelimit `src/settings/settings.go`), and the standard
//! `OTEL_EXPORTER_OTLP_*`, `OTEL_BSP_*` and `OTEL_RESOURCE_ATTRIBUTES` as
//! the Go SDK and its OTLP exporters read them (opentelemetry-go
//! `exporters/otlp/otlptrace/*/internal/otlpconfig/envconfig.go`,
//! `sdk/trace/batch_span_processor.go`, `sdk/resource/env.go`). Like Go,
//! an `OTEL_*` value that cannot be read is ignored with a warning (a
//! deployment that starts with the reference starts here); a `TRACING_*`
//! value that cannot be read stops the start, as the reference's does.

use std::time::Duration;

use crate::settings::SettingsError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// OTLP/HTTP with protobuf bodies: `POST <endpoint>/v1/traces`.
    Http,
    /// OTLP/gRPC: `TraceService/Export`.
    Grpc,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TraceSettings {
    /// `TRACING_ENABLED`.
    pub enabled: bool,
    /// `TRACING_SERVICE_NAME` (default `RateLimit`), `..._NAMESPACE`,
    /// `..._INSTANCE_ID` (empty: a random UUID at start).
    pub service_name: String,
    pub service_namespace: String,
    pub service_instance_id: String,
    /// `TRACING_EXPORTER_PROTOCOL`: `http` (default) or `grpc`.
    pub protocol: Protocol,
    /// `TRACING_SAMPLING_RATE` (default 1): the ratio of traces started
    /// here that are sampled; a caller's sampled flag decides for its own.
    pub sampling_rate: f64,
    pub exporter: ExporterSettings,
    pub batch: BatchSettings,
    /// `OTEL_RESOURCE_ATTRIBUTES`, under the service's own three.
    pub resource_attributes: Vec<(String, String)>,
    /// `OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT` (or
    /// `OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT`): string attributes are cut to
    /// this many bytes; `None` (`-1`): no limit. Go's default is no limit;
    /// here 4096, so that a client's huge request (`request string`) cannot
    /// fill the queue's memory or a batch past a collector's size limit.
    pub attribute_value_length_limit: Option<usize>,
    /// What was ignored, logged at start.
    pub warnings: Vec<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ExporterSettings {
    /// Plaintext (`http://` or `*_INSECURE=true`) or TLS.
    pub insecure: bool,
    pub host: String,
    pub port: u16,
    /// The HTTP request's path (OTLP/HTTP only).
    pub path: String,
    pub headers: Vec<(String, String)>,
    /// `OTEL_EXPORTER_OTLP_TIMEOUT` (ms, default 10 s): one export's bound.
    pub timeout: Duration,
    /// `OTEL_EXPORTER_OTLP_CERTIFICATE`: the collector's CA (PEM file).
    pub ca_cert: String,
    /// `OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE`/`_KEY`: this service's.
    pub client_cert: String,
    pub client_key: String,
}

/// The batch span processor's bounds (Go's defaults).
#[derive(Clone, Debug, PartialEq)]
pub struct BatchSettings {
    /// `OTEL_BSP_MAX_QUEUE_SIZE` (2048): spans past it are dropped.
    pub max_queue: usize,
    /// `OTEL_BSP_SCHEDULE_DELAY` (5000 ms): the longest a span waits.
    pub schedule_delay: Duration,
    /// `OTEL_BSP_EXPORT_TIMEOUT` (30000 ms).
    pub export_timeout: Duration,
    /// `OTEL_BSP_MAX_EXPORT_BATCH_SIZE` (512).
    pub max_batch: usize,
}

impl TraceSettings {
    pub fn from_lookup(
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<TraceSettings, SettingsError> {
        let enabled = match lookup("TRACING_ENABLED") {
            None => false,
            Some(v) => match v.to_ascii_lowercase().as_str() {
                "1" | "t" | "true" => true,
                "0" | "f" | "false" => false,
                _ => {
                    return Err(SettingsError(format!(
                        "TRACING_ENABLED: invalid boolean '{v}' (expected true or false)"
                    )))
                }
            },
        };
        let sampling_rate = match lookup("TRACING_SAMPLING_RATE") {
            None => 1.0,
            Some(v) => v
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|f| !f.is_nan())
                .ok_or_else(|| {
                    SettingsError(format!(
                        "TRACING_SAMPLING_RATE: invalid number '{v}' (0.0 to 1.0)"
                    ))
                })?,
        };
        let protocol = match lookup("TRACING_EXPORTER_PROTOCOL").as_deref() {
            None | Some("http") | Some("") => Protocol::Http,
            Some("grpc") => Protocol::Grpc,
            Some(other) if enabled => {
                return Err(SettingsError(format!(
                    "TRACING_EXPORTER_PROTOCOL: invalid protocol '{other}' (http or grpc)"
                )))
            }
            // As the reference: only checked when tracing is on.
            Some(_) => Protocol::Http,
        };
        let mut warnings = Vec::new();
        let otel = |name: &str| {
            lookup(name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        // Per-signal variables after the general ones: they win.
        let pick = |name: &str| {
            otel(&format!("OTEL_EXPORTER_OTLP_TRACES_{name}"))
                .or_else(|| otel(&format!("OTEL_EXPORTER_OTLP_{name}")))
        };
        let (default_port, mut insecure) = match protocol {
            Protocol::Http => (4318, false),
            Protocol::Grpc => (4317, false),
        };
        let (mut host, mut port, mut path) = (
            "localhost".to_string(),
            default_port,
            "/v1/traces".to_string(),
        );
        for (name, per_signal) in [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", false),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", true),
        ] {
            let Some(v) = otel(name) else { continue };
            let Some(u) = parse_url(&v) else {
                warnings.push(format!(
                    "{name}: '{v}' is not a URL (http://host:port or https://host:port): ignored"
                ));
                continue;
            };
            insecure = u.scheme == "http";
            host = u.host;
            port = u.port.unwrap_or(if insecure { 80 } else { 443 });
            path = if per_signal {
                clean_path(&u.path, "/")
            } else {
                clean_path(&format!("{}/v1/traces", u.path), "/v1/traces")
            };
        }
        for name in [
            "OTEL_EXPORTER_OTLP_INSECURE",
            "OTEL_EXPORTER_OTLP_TRACES_INSECURE",
        ] {
            if let Some(v) = otel(name) {
                insecure = v.eq_ignore_ascii_case("true");
            }
        }
        let mut headers = Vec::new();
        for name in [
            "OTEL_EXPORTER_OTLP_HEADERS",
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        ] {
            if let Some(v) = otel(name) {
                // The per-signal list replaces the general one, as in Go.
                headers = parse_pairs(name, &v, &mut warnings, true);
            }
        }
        let mut timeout = Duration::from_secs(10);
        for name in [
            "OTEL_EXPORTER_OTLP_TIMEOUT",
            "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
        ] {
            if let Some(v) = otel(name) {
                match v.parse::<u64>() {
                    Ok(ms) => timeout = Duration::from_millis(ms),
                    Err(_) => warnings.push(format!(
                        "{name}: invalid number of milliseconds '{v}': ignored"
                    )),
                }
            }
        }
        if pick("COMPRESSION").as_deref() == Some("gzip") {
            warnings.push(
                "OTEL_EXPORTER_OTLP_COMPRESSION gzip: spans are sent uncompressed (collectors take both)"
                    .into(),
            );
        }
        let ms = |name: &str, default: u64, warnings: &mut Vec<String>| match otel(name) {
            None => default,
            Some(v) => match v.parse::<u64>() {
                Ok(n) if n > 0 => n,
                _ => {
                    warnings.push(format!("{name}: invalid value '{v}': {default} is used"));
                    default
                }
            },
        };
        let max_queue = ms("OTEL_BSP_MAX_QUEUE_SIZE", 2048, &mut warnings) as usize;
        let schedule_delay =
            Duration::from_millis(ms("OTEL_BSP_SCHEDULE_DELAY", 5000, &mut warnings));
        let export_timeout =
            Duration::from_millis(ms("OTEL_BSP_EXPORT_TIMEOUT", 30000, &mut warnings));
        // A batch is never larger than the queue (as Go caps it).
        let max_batch =
            (ms("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512, &mut warnings) as usize).min(max_queue);
        let resource_attributes = match otel("OTEL_RESOURCE_ATTRIBUTES") {
            Some(v) => parse_pairs("OTEL_RESOURCE_ATTRIBUTES", &v, &mut warnings, false),
            None => Vec::new(),
        };
        let mut attribute_value_length_limit = Some(DEFAULT_ATTRIBUTE_VALUE_LENGTH_LIMIT);
        for name in [
            "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT",
            "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT",
        ] {
            if let Some(v) = otel(name) {
                match v.parse::<i64>() {
                    Ok(n) if n < 0 => attribute_value_length_limit = None,
                    Ok(n) => attribute_value_length_limit = usize::try_from(n).ok(),
                    Err(_) => warnings.push(format!("{name}: invalid number '{v}': ignored")),
                }
            }
        }
        let (client_cert, client_key) = match (pick("CLIENT_CERTIFICATE"), pick("CLIENT_KEY")) {
            (Some(c), Some(k)) => (c, k),
            _ => (String::new(), String::new()),
        };
        Ok(TraceSettings {
            enabled,
            service_name: lookup("TRACING_SERVICE_NAME").unwrap_or_else(|| "RateLimit".into()),
            service_namespace: lookup("TRACING_SERVICE_NAMESPACE").unwrap_or_default(),
            service_instance_id: lookup("TRACING_SERVICE_INSTANCE_ID").unwrap_or_default(),
            protocol,
            sampling_rate,
            exporter: ExporterSettings {
                insecure,
                host,
                port,
                path,
                headers,
                timeout,
                ca_cert: pick("CERTIFICATE").unwrap_or_default(),
                client_cert,
                client_key,
            },
            batch: BatchSettings {
                max_queue,
                schedule_delay,
                export_timeout,
                max_batch,
            },
            resource_attributes,
            attribute_value_length_limit,
            warnings: if enabled { warnings } else { Vec::new() },
        })
    }
}

pub const DEFAULT_ATTRIBUTE_VALUE_LENGTH_LIMIT: usize = 4096;

struct Url {
    scheme: String,
    host: String,
    port: Option<u16>,
    path: String,
}

/// `scheme://host[:port][/path]`, the form the exporters take (a bare
/// `host:port` is no URL to Go either: it reads `host` as a scheme).
fn parse_url(v: &str) -> Option<Url> {
    let (scheme, rest) = v.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    if !matches!(scheme.as_str(), "http" | "https") {
        return None;
    }
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let authority = authority.rsplit('@').next().unwrap_or(authority);
    let (host, port) = if let Some(h) = authority.strip_prefix('[') {
        let (h, after) = h.split_once(']')?;
        (h, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return None;
    }
    let port = match port {
        None | Some("") => None,
        Some(p) => Some(p.parse().ok()?),
    };
    let path = path.split(['?', '#']).next().unwrap_or_default();
    Some(Url {
        scheme,
        host: host.to_string(),
        port,
        path: path.to_string(),
    })
}

/// Go's `path.Clean`, enough for URL paths: no empty or `.` segments,
/// `..` resolved, absolute; empty is `default`.
fn clean_path(p: &str, default: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    for seg in p.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                out.pop();
            }
            s => out.push(s),
        }
    }
    if out.is_empty() {
        return default.to_string();
    }
    format!("/{}", out.join("/"))
}

/// `key=value,key2=value2`, values percent-decoded and trimmed; a pair
/// without `=`, or (for headers) with a key that is no HTTP token, is
/// ignored with a warning.
fn parse_pairs(
    name: &str,
    v: &str,
    warnings: &mut Vec<String>,
    header_keys: bool,
) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for item in v.split(',') {
        let Some((k, val)) = item.split_once('=') else {
            warnings.push(format!("{name}: '{item}' has no '=': ignored"));
            continue;
        };
        let k = k.trim();
        let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
        if k.is_empty() || (header_keys && !k.chars().all(token)) {
            warnings.push(format!("{name}: invalid key '{k}': ignored"));
            continue;
        }
        let Some(val) = percent_decode(val) else {
            warnings.push(format!("{name}: invalid escape in '{val}': ignored"));
            continue;
        };
        if header_keys
            && val
                .trim()
                .parse::<tonic::metadata::AsciiMetadataValue>()
                .is_err()
        {
            warnings.push(format!(
                "{name}: the value of '{k}' is no valid header value: ignored"
            ));
            continue;
        }
        out.retain(|(old, _)| old != k);
        out.push((k.to_string(), val.trim().to_string()));
    }
    out
}

fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn from(pairs: &[(&str, &str)]) -> Result<TraceSettings, SettingsError> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        TraceSettings::from_lookup(&move |k| m.get(k).cloned())
    }

    #[test]
    fn defaults_are_the_reference_and_go_exporters() {
        let s = from(&[]).unwrap();
        assert!(!s.enabled);
        assert_eq!(s.service_name, "RateLimit");
        assert_eq!(s.service_namespace, "");
        assert_eq!(s.protocol, Protocol::Http);
        assert_eq!(s.sampling_rate, 1.0);
        let e = &s.exporter;
        // Go's exporters default to TLS, even to localhost.
        assert!(!e.insecure);
        assert_eq!(
            (e.host.as_str(), e.port, e.path.as_str()),
            ("localhost", 4318, "/v1/traces")
        );
        assert_eq!(e.timeout, Duration::from_secs(10));
        assert_eq!(s.batch.max_queue, 2048);
        assert_eq!(s.batch.max_batch, 512);
        assert_eq!(s.batch.schedule_delay, Duration::from_secs(5));
        assert_eq!(s.batch.export_timeout, Duration::from_secs(30));
        let g = from(&[("TRACING_EXPORTER_PROTOCOL", "grpc")]).unwrap();
        assert_eq!((g.exporter.port, g.protocol), (4317, Protocol::Grpc));
    }

    #[test]
    fn envoy_gateway_environment() {
        // internal/infrastructure/kubernetes/ratelimit/testdata/deployments/
        let s = from(&[
            ("TRACING_ENABLED", "true"),
            ("TRACING_SERVICE_NAME", "envoy-ratelimit"),
            ("TRACING_SERVICE_NAMESPACE", "envoy-gateway-system"),
            ("TRACING_SERVICE_INSTANCE_ID", "envoy-ratelimit-7d9f-abcde"),
            ("TRACING_SAMPLING_RATE", "0.6"),
            (
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                "http://trace-collector.envoy-gateway-system.svc.cluster.local:4318",
            ),
        ])
        .unwrap();
        assert!(s.enabled);
        assert_eq!(s.sampling_rate, 0.6);
        assert_eq!(s.service_instance_id, "envoy-ratelimit-7d9f-abcde");
        let e = &s.exporter;
        assert!(e.insecure);
        assert_eq!(
            e.host,
            "trace-collector.envoy-gateway-system.svc.cluster.local"
        );
        assert_eq!((e.port, e.path.as_str()), (4318, "/v1/traces"));
        assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    }

    #[test]
    fn endpoints_as_go_reads_them() {
        let s = from(&[(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "https://c.example:9000/otlp/",
        )])
        .unwrap();
        assert!(!s.exporter.insecure);
        assert_eq!(s.exporter.path, "/otlp/v1/traces");
        // The per-signal endpoint is taken as it is (the root when no path).
        let s = from(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:1"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://b:2"),
        ])
        .unwrap();
        assert_eq!(
            (
                s.exporter.host.as_str(),
                s.exporter.port,
                s.exporter.path.as_str()
            ),
            ("b", 2, "/")
        );
        let s = from(&[(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "http://[::1]:4318/x/traces",
        )])
        .unwrap();
        assert_eq!(
            (s.exporter.host.as_str(), s.exporter.path.as_str()),
            ("::1", "/x/traces")
        );
        // INSECURE overrides the scheme.
        let s = from(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://a:1"),
            ("OTEL_EXPORTER_OTLP_INSECURE", "TRUE"),
        ])
        .unwrap();
        assert!(s.exporter.insecure);
        let s = from(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a")]).unwrap();
        assert_eq!(s.exporter.port, 80);
    }

    #[test]
    fn unreadable_otel_values_are_ignored_with_a_warning() {
        let s = from(&[
            ("TRACING_ENABLED", "true"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "5s"),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "a=1,broken,b c=2,api-key=x%20y",
            ),
            ("OTEL_BSP_MAX_QUEUE_SIZE", "0"),
        ])
        .unwrap();
        assert_eq!(s.exporter.host, "localhost");
        assert_eq!(s.exporter.timeout, Duration::from_secs(10));
        assert_eq!(
            s.exporter.headers,
            vec![("a".into(), "1".into()), ("api-key".into(), "x y".into())]
        );
        assert_eq!(s.batch.max_queue, 2048);
        assert_eq!(s.warnings.len(), 5, "{:?}", s.warnings);
        assert!(
            s.warnings[0].starts_with("OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' is not a URL")
        );
    }

    #[test]
    fn tracing_values_are_checked() {
        assert_eq!(
            from(&[("TRACING_SAMPLING_RATE", "half")]).unwrap_err().0,
            "TRACING_SAMPLING_RATE: invalid number 'half' (0.0 to 1.0)"
        );
        assert!(from(&[("TRACING_SAMPLING_RATE", "NaN")]).is_err());
        assert_eq!(
            from(&[("TRACING_ENABLED", "yes")]).unwrap_err().0,
            "TRACING_ENABLED: invalid boolean 'yes' (expected true or false)"
        );
        assert_eq!(
            from(&[
                ("TRACING_ENABLED", "true"),
                ("TRACING_EXPORTER_PROTOCOL", "zipkin")
            ])
            .unwrap_err()
            .0,
            "TRACING_EXPORTER_PROTOCOL: invalid protocol 'zipkin' (http or grpc)"
        );
        // As the reference, the protocol is read only when tracing is on.
        assert!(from(&[("TRACING_EXPORTER_PROTOCOL", "zipkin")]).is_ok());
        // Out of [0, 1] is taken as Go's sampler takes it (never, always).
        assert_eq!(
            from(&[("TRACING_SAMPLING_RATE", "2")])
                .unwrap()
                .sampling_rate,
            2.0
        );
    }

    #[test]
    fn resource_attributes_and_batches() {
        let s = from(&[
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "deployment.environment=prod,k8s.pod.name=p%2D1",
            ),
            ("OTEL_BSP_MAX_QUEUE_SIZE", "100"),
            ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "512"),
        ])
        .unwrap();
        assert_eq!(
            s.resource_attributes,
            vec![
                ("deployment.environment".into(), "prod".into()),
                ("k8s.pod.name".into(), "p-1".into())
            ]
        );
        assert_eq!((s.batch.max_queue, s.batch.max_batch), (100, 100));
        assert_eq!(s.attribute_value_length_limit, Some(4096));
        let s = from(&[("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "-1")]).unwrap();
        assert_eq!(s.attribute_value_length_limit, None);
        let s = from(&[
            ("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "-1"),
            ("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "10"),
        ])
        .unwrap();
        assert_eq!(s.attribute_value_length_limit, Some(10));
    }
}
