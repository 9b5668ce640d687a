//! Settings from the environment, with envoyproxy/ratelimit's variable
//! names and defaults for what this service has. Pure: reads through a
//! lookup function so tests need no process environment.

use std::time::Duration;

#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    pub host: String,
    pub port: u16,
    pub grpc_host: String,
    pub grpc_port: u16,
    /// `GRPC_UDS`: when set, the gRPC server listens on this Unix domain
    /// socket instead of `GRPC_HOST:GRPC_PORT`.
    pub grpc_uds: String,
    pub debug_host: String,
    pub debug_port: u16,
    pub log_level: String,
    pub log_format: String,
    pub use_statsd: bool,
    pub statsd_host: String,
    pub statsd_port: u16,
    pub stats_flush_interval: Duration,
    pub disable_stats: bool,
    pub use_prometheus: bool,
    pub prometheus_addr: String,
    pub prometheus_path: String,
    /// `PROMETHEUS_MAPPER_YAML`: a statsd_exporter mapping file that
    /// replaces the built-in mapping (empty: the built-in one).
    pub prometheus_mapper_yaml: String,
    /// `PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS`: the built-in mapping's
    /// response time histogram in milliseconds instead of seconds.
    pub prometheus_response_time_as_milliseconds: bool,
    /// `USE_DOG_STATSD`: statsd lines with DogStatsD tags (`|#k:v`).
    pub use_dog_statsd: bool,
    /// `EXTRA_TAGS` (`k:v,k2:v2`): tags of every stat.
    pub extra_tags: std::collections::BTreeMap<String, String>,
    /// `LOCAL_CACHE_SIZE_IN_BYTES`: the local over-limit cache's bound (0:
    /// no cache).
    pub local_cache_size_in_bytes: usize,
    pub runtime_root: String,
    pub runtime_subdirectory: String,
    pub runtime_appdirectory: String,
    pub runtime_ignore_dot_files: bool,
    pub runtime_watch_root: bool,
    pub expiration_jitter_max_seconds: i64,
    pub near_limit_ratio: f32,
    pub cache_key_prefix: String,
    pub backend_type: String,
    pub stop_cache_key_increment_when_overlimit: bool,
    pub limit_response_headers_enabled: bool,
    pub header_limit: String,
    pub header_remaining: String,
    pub header_reset: String,
    pub healthy_with_at_least_one_config_loaded: bool,
    /// `RESPONSE_DYNAMIC_METADATA`: the response's `dynamic_metadata`
    /// carries the request's domain, descriptors and hits.
    pub response_dynamic_metadata: bool,
    /// `REDIS_HEALTH_CHECK_ACTIVE_CONNECTION`: unhealthy while Redis
    /// cannot be reached.
    pub redis_health_check_active_connection: bool,
    /// `REDIS_STARTUP_*`: the first connection to Redis is retried with
    /// exponential backoff between these intervals, until it succeeds or
    /// (when not zero) the elapsed time runs out.
    pub redis_startup: StartupRetry,
    pub force_start_without_initial_config: bool,
    pub redis: RedisSettings,
    pub redis_per_second: Option<RedisSettings>,
    pub shadow_mode: bool,
    pub quota_mode: bool,
    pub merge_domain_config: bool,
    /// Extension: charge a request's descriptors all-or-nothing.
    pub all_or_nothing: bool,
    /// Extension: how often the runtime directory is checked for changes.
    pub runtime_poll_interval: Duration,
    /// Extension: bounds of a configuration load (one file, all files,
    /// nesting depth, time).
    pub runtime_max_file_bytes: u64,
    pub runtime_max_total_bytes: u64,
    pub runtime_max_depth: usize,
    pub runtime_load_timeout: Duration,
    /// Extension: limit keys with their own stats series.
    pub stats_max_keys: usize,
    /// Extension: connections per HTTP listener, and the time a connection
    /// has to send its request, then to be answered.
    pub http_max_connections: usize,
    pub http_read_timeout: Duration,
    pub http_write_timeout: Duration,
    /// Extension: gRPC connections, the time a new one has to send the
    /// HTTP/2 preface, and how long one may stay without a request.
    pub grpc_max_connections: usize,
    pub grpc_handshake_timeout: Duration,
    pub grpc_max_connection_idle: Duration,
    pub grpc_max_concurrent_streams: u32,
    pub grpc_max_connection_age: Duration,
    pub grpc_max_connection_age_grace: Duration,
    /// Extension: the time a gRPC request has from its headers to its
    /// answer (its body included), so a stream that never sends its body
    /// does not keep its connection busy for good.
    pub grpc_request_timeout: Duration,
    pub grpc_tls: GrpcTlsSettings,
    /// `CONFIG_TYPE`: `FILE` or `GRPC_XDS_SOTW`.
    pub config_type: String,
    pub xds: crate::xds::XdsSettings,
    /// `TRACING_*` and the OTLP exporter's `OTEL_*` (see `trace::settings`).
    pub tracing: crate::trace::TraceSettings,
}

#[derive(Clone, Debug, PartialEq)]
pub struct RedisSettings {
    pub socket_type: String,
    /// `SINGLE`, `CLUSTER` or `SENTINEL`.
    pub kind: String,
    pub url: String,
    pub pool_size: usize,
    pub auth: String,
    pub tls: bool,
    pub tls_skip_hostname_verification: bool,
    /// `REDIS_TLS_CLIENT_CERT`/`KEY` (offered only when both are set) and
    /// `REDIS_TLS_CACERT` (trusted beside the system's roots): the same
    /// for the per-second Redis, as the reference has them.
    pub tls_client_cert: String,
    pub tls_client_key: String,
    pub tls_cacert: String,
    pub sentinel_auth: String,
    pub timeout: Duration,
}

/// How the first connection to Redis is retried (the reference's
/// `REDIS_STARTUP_INITIAL_INTERVAL`, `REDIS_STARTUP_MAX_INTERVAL`,
/// `REDIS_STARTUP_MAX_ELAPSED_TIME`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StartupRetry {
    pub initial_interval: Duration,
    pub max_interval: Duration,
    /// Zero: retry until Redis answers.
    pub max_elapsed: Duration,
}

/// TLS on the gRPC listener, with the reference's variables.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct GrpcTlsSettings {
    /// `GRPC_SERVER_USE_TLS`.
    pub enabled: bool,
    /// `GRPC_SERVER_TLS_CERT`/`KEY`: the certificate chain and its key.
    pub cert: String,
    pub key: String,
    /// `GRPC_CLIENT_TLS_CACERT`: when set, every client must present a
    /// certificate that this CA (or a system root) issued for client use.
    pub client_cacert: String,
    /// `GRPC_CLIENT_TLS_SAN`: the name (or IP address) the client's
    /// certificate must carry; checked only with `GRPC_CLIENT_TLS_CACERT`.
    pub client_san: String,
    /// `GRPC_SERVER_TLS_CA_CERT`, which Envoy Gateway sets: accepted and,
    /// as in the reference (which does not read it), without effect.
    pub server_ca_cert: String,
}

/// A setting that cannot be read: the variable and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SettingsError(pub String);

impl std::fmt::Display for SettingsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

struct Env<'a>(&'a dyn Fn(&str) -> Option<String>);

impl Env<'_> {
    fn s(&self, name: &str, default: &str) -> String {
        (self.0)(name).unwrap_or_else(|| default.to_string())
    }

    fn b(&self, name: &str, default: bool) -> Result<bool, SettingsError> {
        match (self.0)(name) {
            None => Ok(default),
            Some(v) => match v.to_ascii_lowercase().as_str() {
                "1" | "t" | "true" => Ok(true),
                "0" | "f" | "false" => Ok(false),
                _ => Err(SettingsError(format!(
                    "{name}: invalid boolean '{v}' (expected true or false)"
                ))),
            },
        }
    }

    fn n<T: std::str::FromStr>(&self, name: &str, default: T) -> Result<T, SettingsError> {
        match (self.0)(name) {
            None => Ok(default),
            Some(v) => v
                .trim()
                .parse()
                .map_err(|_| SettingsError(format!("{name}: invalid number '{v}'"))),
        }
    }

    fn d(&self, name: &str, default: Duration) -> Result<Duration, SettingsError> {
        match (self.0)(name) {
            None => Ok(default),
            Some(v) => parse_duration(&v).ok_or_else(|| {
                SettingsError(format!(
                    "{name}: invalid duration '{v}' (Go's syntax, e.g. 10s or 1h30m; at most 876000h)"
                ))
            }),
        }
    }
}

/// Go's duration syntax as the reference's settings take it (`10s`,
/// `500ms`, `1m30s`, `24h`, `0`).
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    if s == "0" {
        return Some(Duration::ZERO);
    }
    let mut total: f64 = 0.0;
    let mut rest = s;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return None;
        }
        let n: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += n * scale;
    }
    // At most 100 years: a longer one would overflow the deadlines
    // computed from it (an `Instant` plus it), or a `Duration` itself.
    if !(total.is_finite() && total <= MAX_DURATION_SECS) {
        return None;
    }
    Duration::try_from_secs_f64(total).ok()
}

/// A map setting as the reference's envconfig reads it: `k:v` pairs
/// separated by commas, each with exactly one colon (empty: no pairs).
pub fn parse_tags(s: &str) -> Result<std::collections::BTreeMap<String, String>, String> {
    let mut out = std::collections::BTreeMap::new();
    if s.trim().is_empty() {
        return Ok(out);
    }
    for pair in s.split(',') {
        let mut kv = pair.split(':');
        match (kv.next(), kv.next(), kv.next()) {
            (Some(k), Some(v), None) => {
                out.insert(k.to_string(), v.to_string());
            }
            _ => return Err(format!("invalid map item: {pair:?} (expected k:v,k2:v2)")),
        }
    }
    Ok(out)
}

/// The longest duration a setting takes (100 years of 365 days).
pub const MAX_DURATION_SECS: f64 = 876_000.0 * 3600.0;

/// `HOST:PORT` or `:PORT` (all interfaces, as Go reads it).
pub fn split_addr(addr: &str) -> Option<(String, u16)> {
    let (host, port) = addr.rsplit_once(':')?;
    let port = port.parse().ok()?;
    let host = if host.is_empty() { "0.0.0.0" } else { host };
    Some((
        host.trim_matches(|c| c == '[' || c == ']').to_string(),
        port,
    ))
}

impl Settings {
    pub fn from_env() -> Result<Settings, SettingsError> {
        Settings::from_lookup(&|k| std::env::var(k).ok())
    }

    pub fn from_lookup(lookup: &dyn Fn(&str) -> Option<String>) -> Result<Settings, SettingsError> {
        let e = Env(lookup);
        let redis = |prefix: &str, default_url: &str| -> Result<RedisSettings, SettingsError> {
            Ok(RedisSettings {
                socket_type: e.s(&format!("{prefix}_SOCKET_TYPE"), "unix"),
                kind: e
                    .s(&format!("{prefix}_TYPE"), "SINGLE")
                    .to_ascii_uppercase(),
                url: e.s(&format!("{prefix}_URL"), default_url),
                pool_size: e.n(&format!("{prefix}_POOL_SIZE"), 10)?,
                auth: e.s(&format!("{prefix}_AUTH"), ""),
                tls: e.b(&format!("{prefix}_TLS"), false)?,
                tls_skip_hostname_verification: e
                    .b("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", false)?,
                tls_client_cert: e.s("REDIS_TLS_CLIENT_CERT", ""),
                tls_client_key: e.s("REDIS_TLS_CLIENT_KEY", ""),
                tls_cacert: e.s("REDIS_TLS_CACERT", ""),
                sentinel_auth: e.s(&format!("{prefix}_SENTINEL_AUTH"), ""),
                timeout: e.d(&format!("{prefix}_TIMEOUT"), Duration::from_secs(10))?,
            })
        };
        let use_statsd = e.b("USE_STATSD", true)?;
        let use_prometheus = e.b("USE_PROMETHEUS", false)?;
        let use_dog_statsd = e.b("USE_DOG_STATSD", false)?;
        if use_statsd && use_prometheus {
            return Err(SettingsError(
                "USE_STATSD and USE_PROMETHEUS cannot both be true: set USE_STATSD=false to use Prometheus".into(),
            ));
        }
        if use_dog_statsd && (use_statsd || use_prometheus) {
            return Err(SettingsError(
                "USE_DOG_STATSD: one stats sink at a time: set USE_STATSD=false and USE_PROMETHEUS=false to use DogStatsD".into(),
            ));
        }
        let backend_type = e.s("BACKEND_TYPE", "redis");
        if backend_type != "redis" {
            return Err(SettingsError(format!(
                "BACKEND_TYPE: '{backend_type}' is not supported (only redis, through redis-cell)"
            )));
        }
        let s = Settings {
            host: e.s("HOST", "0.0.0.0"),
            port: e.n("PORT", 8080)?,
            grpc_host: e.s("GRPC_HOST", "0.0.0.0"),
            grpc_port: e.n("GRPC_PORT", 8081)?,
            grpc_uds: e.s("GRPC_UDS", ""),
            debug_host: e.s("DEBUG_HOST", "0.0.0.0"),
            debug_port: e.n("DEBUG_PORT", 6070)?,
            log_level: e.s("LOG_LEVEL", "WARN").to_ascii_uppercase(),
            log_format: e.s("LOG_FORMAT", "text").to_ascii_lowercase(),
            use_statsd,
            statsd_host: e.s("STATSD_HOST", "localhost"),
            statsd_port: e.n("STATSD_PORT", 8125)?,
            stats_flush_interval: e.d("STATS_FLUSH_INTERVAL", Duration::from_secs(10))?,
            disable_stats: e.b("DISABLE_STATS", false)?,
            use_prometheus,
            prometheus_addr: e.s("PROMETHEUS_ADDR", ":9090"),
            prometheus_path: e.s("PROMETHEUS_PATH", "/metrics"),
            prometheus_mapper_yaml: e.s("PROMETHEUS_MAPPER_YAML", ""),
            prometheus_response_time_as_milliseconds: e
                .b("PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", false)?,
            use_dog_statsd,
            extra_tags: parse_tags(&e.s("EXTRA_TAGS", ""))
                .map_err(|m| SettingsError(format!("EXTRA_TAGS: {m}")))?,
            local_cache_size_in_bytes: e.n("LOCAL_CACHE_SIZE_IN_BYTES", 0)?,
            runtime_root: e.s("RUNTIME_ROOT", "/srv/runtime_data/current"),
            runtime_subdirectory: e.s("RUNTIME_SUBDIRECTORY", ""),
            runtime_appdirectory: e.s("RUNTIME_APPDIRECTORY", "config"),
            runtime_ignore_dot_files: e.b("RUNTIME_IGNOREDOTFILES", false)?,
            runtime_watch_root: e.b("RUNTIME_WATCH_ROOT", true)?,
            expiration_jitter_max_seconds: e.n("EXPIRATION_JITTER_MAX_SECONDS", 300)?,
            near_limit_ratio: e.n("NEAR_LIMIT_RATIO", 0.8)?,
            cache_key_prefix: e.s("CACHE_KEY_PREFIX", ""),
            backend_type,
            stop_cache_key_increment_when_overlimit: e
                .b("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", false)?,
            limit_response_headers_enabled: e.b("LIMIT_RESPONSE_HEADERS_ENABLED", false)?,
            header_limit: e.s("LIMIT_LIMIT_HEADER", "RateLimit-Limit"),
            header_remaining: e.s("LIMIT_REMAINING_HEADER", "RateLimit-Remaining"),
            header_reset: e.s("LIMIT_RESET_HEADER", "RateLimit-Reset"),
            healthy_with_at_least_one_config_loaded: e
                .b("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", false)?,
            force_start_without_initial_config: e.b("FORCE_START_WITHOUT_INITIAL_CONFIG", false)?,
            response_dynamic_metadata: e.b("RESPONSE_DYNAMIC_METADATA", false)?,
            redis_health_check_active_connection: e
                .b("REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", false)?,
            redis_startup: StartupRetry {
                initial_interval: e.d("REDIS_STARTUP_INITIAL_INTERVAL", Duration::from_secs(1))?,
                max_interval: e.d("REDIS_STARTUP_MAX_INTERVAL", Duration::from_secs(30))?,
                max_elapsed: e.d("REDIS_STARTUP_MAX_ELAPSED_TIME", Duration::ZERO)?,
            },
            redis: redis("REDIS", "/var/run/nutcracker/ratelimit.sock")?,
            redis_per_second: if e.b("REDIS_PERSECOND", false)? {
                Some(redis(
                    "REDIS_PERSECOND",
                    "/var/run/nutcracker/ratelimitpersecond.sock",
                )?)
            } else {
                None
            },
            shadow_mode: e.b("SHADOW_MODE", false)?,
            quota_mode: e.b("QUOTA_MODE", false)?,
            merge_domain_config: e.b("MERGE_DOMAIN_CONFIG", false)?,
            all_or_nothing: e.b("ALL_OR_NOTHING", false)?,
            runtime_poll_interval: e.d("RUNTIME_POLL_INTERVAL", Duration::from_secs(1))?,
            runtime_max_file_bytes: e.n("RUNTIME_MAX_FILE_BYTES", 1 << 20)?,
            runtime_max_total_bytes: e.n("RUNTIME_MAX_TOTAL_BYTES", 4 << 20)?,
            runtime_max_depth: e.n("RUNTIME_MAX_DEPTH", 64)?,
            runtime_load_timeout: e.d("RUNTIME_LOAD_TIMEOUT", Duration::from_secs(10))?,
            stats_max_keys: e.n("STATS_MAX_KEYS", crate::stats::DEFAULT_MAX_KEYS)?,
            http_max_connections: e.n("HTTP_MAX_CONNECTIONS", 256)?,
            http_read_timeout: e.d("HTTP_READ_TIMEOUT", Duration::from_secs(10))?,
            http_write_timeout: e.d("HTTP_WRITE_TIMEOUT", Duration::from_secs(30))?,
            grpc_max_connections: e.n("GRPC_MAX_CONNECTIONS", 4096)?,
            grpc_handshake_timeout: e.d("GRPC_HANDSHAKE_TIMEOUT", Duration::from_secs(10))?,
            grpc_max_connection_idle: e.d("GRPC_MAX_CONNECTION_IDLE", Duration::from_secs(3600))?,
            grpc_max_concurrent_streams: e.n("GRPC_MAX_CONCURRENT_STREAMS", 1024)?,
            grpc_max_connection_age: e
                .d("GRPC_MAX_CONNECTION_AGE", Duration::from_secs(24 * 3600))?,
            grpc_max_connection_age_grace: e
                .d("GRPC_MAX_CONNECTION_AGE_GRACE", Duration::from_secs(3600))?,
            grpc_request_timeout: e.d("GRPC_REQUEST_TIMEOUT", Duration::from_secs(30))?,
            grpc_tls: GrpcTlsSettings {
                enabled: e.b("GRPC_SERVER_USE_TLS", false)?,
                cert: e.s("GRPC_SERVER_TLS_CERT", ""),
                key: e.s("GRPC_SERVER_TLS_KEY", ""),
                client_cacert: e.s("GRPC_CLIENT_TLS_CACERT", ""),
                client_san: e.s("GRPC_CLIENT_TLS_SAN", ""),
                server_ca_cert: e.s("GRPC_SERVER_TLS_CA_CERT", ""),
            },
            config_type: e.s("CONFIG_TYPE", "FILE"),
            xds: crate::xds::XdsSettings::from_lookup(lookup)?,
            tracing: crate::trace::TraceSettings::from_lookup(lookup)?,
        };
        if s.grpc_tls.enabled && (s.grpc_tls.cert.is_empty() || s.grpc_tls.key.is_empty()) {
            return Err(SettingsError(
                "GRPC_SERVER_USE_TLS: GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY are both needed"
                    .into(),
            ));
        }
        if !matches!(s.config_type.as_str(), "FILE" | "GRPC_XDS_SOTW") {
            return Err(SettingsError(format!(
                "CONFIG_TYPE: invalid setting '{}' (FILE or GRPC_XDS_SOTW)",
                s.config_type
            )));
        }
        for (name, v) in [
            ("RUNTIME_MAX_FILE_BYTES", s.runtime_max_file_bytes),
            ("RUNTIME_MAX_TOTAL_BYTES", s.runtime_max_total_bytes),
            ("RUNTIME_MAX_DEPTH", s.runtime_max_depth as u64),
            ("STATS_MAX_KEYS", s.stats_max_keys as u64),
            ("HTTP_MAX_CONNECTIONS", s.http_max_connections as u64),
            ("GRPC_MAX_CONNECTIONS", s.grpc_max_connections as u64),
            (
                "GRPC_MAX_CONCURRENT_STREAMS",
                u64::from(s.grpc_max_concurrent_streams),
            ),
        ] {
            if v == 0 {
                return Err(SettingsError(format!("{name}: must be at least 1")));
            }
        }
        for (name, d) in [
            ("RUNTIME_LOAD_TIMEOUT", s.runtime_load_timeout),
            ("HTTP_READ_TIMEOUT", s.http_read_timeout),
            ("HTTP_WRITE_TIMEOUT", s.http_write_timeout),
            ("GRPC_HANDSHAKE_TIMEOUT", s.grpc_handshake_timeout),
            ("GRPC_MAX_CONNECTION_IDLE", s.grpc_max_connection_idle),
            ("GRPC_MAX_CONNECTION_AGE", s.grpc_max_connection_age),
            ("GRPC_REQUEST_TIMEOUT", s.grpc_request_timeout),
            // 0 would spin a thread: a flush or a directory scan at once,
            // over and over (Go's tickers refuse it too).
            ("STATS_FLUSH_INTERVAL", s.stats_flush_interval),
            ("RUNTIME_POLL_INTERVAL", s.runtime_poll_interval),
        ] {
            if d.is_zero() {
                return Err(SettingsError(format!("{name}: must be longer than 0")));
            }
        }
        if !(0.0..=1.0).contains(&s.near_limit_ratio) {
            return Err(SettingsError(format!(
                "NEAR_LIMIT_RATIO: {} is not between 0 and 1",
                s.near_limit_ratio
            )));
        }
        Ok(s)
    }

    /// The directory whose files are the configuration, and the prefix their
    /// runtime names get (`config.` for `config/x.yaml` under a watched root).
    pub fn config_dir(&self) -> (std::path::PathBuf, String) {
        let mut base = std::path::PathBuf::from(&self.runtime_root);
        if !self.runtime_subdirectory.is_empty() {
            base.push(&self.runtime_subdirectory);
        }
        base.push(&self.runtime_appdirectory);
        let prefix = if self.runtime_watch_root {
            format!("{}.", self.runtime_appdirectory)
        } else {
            String::new()
        };
        (base, prefix)
    }
}

/// The Redis URL the `redis` crate takes, from the reference's settings: a
/// `host:port` (tcp), a socket path (unix), or a full `redis://` URL.
pub fn redis_url(r: &RedisSettings, host_port: &str) -> String {
    if host_port.contains("://") {
        return host_port.to_string();
    }
    let scheme = if r.tls { "rediss" } else { "redis" };
    // The redis crate's `#insecure` (no check at all) serves a cluster's and
    // the sentinels' links; a single server's TLS is the backend's own,
    // which skips only the name check, as the reference.
    let insecure = if r.tls && r.tls_skip_hostname_verification {
        "/#insecure"
    } else {
        ""
    };
    let auth = if r.auth.is_empty() {
        String::new()
    } else if let Some((user, pass)) = r.auth.split_once(':') {
        format!("{user}:{pass}@")
    } else {
        format!(":{}@", r.auth)
    };
    if r.socket_type == "unix" && host_port.starts_with('/') {
        return format!("unix://{host_port}");
    }
    format!("{scheme}://{auth}{host_port}{insecure}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn settings(vars: &[(&str, &str)]) -> Result<Settings, SettingsError> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Settings::from_lookup(&move |k| m.get(k).cloned())
    }

    #[test]
    fn defaults_are_the_references() {
        let s = settings(&[]).unwrap();
        assert_eq!((s.port, s.grpc_port, s.debug_port), (8080, 8081, 6070));
        assert_eq!(s.runtime_root, "/srv/runtime_data/current");
        assert_eq!(s.runtime_appdirectory, "config");
        assert!(s.use_statsd && !s.use_prometheus);
        assert_eq!(s.prometheus_addr, ":9090");
        assert_eq!(s.near_limit_ratio, 0.8);
        assert_eq!(s.header_limit, "RateLimit-Limit");
        assert_eq!(s.stats_flush_interval, Duration::from_secs(10));
        assert_eq!(s.redis.kind, "SINGLE");
        assert!(s.redis_per_second.is_none());
    }

    #[test]
    fn two_stats_sinks_refuse_to_start() {
        let e = settings(&[("USE_PROMETHEUS", "true")]).unwrap_err();
        assert!(e.0.contains("USE_STATSD and USE_PROMETHEUS"), "{e}");
        let s = settings(&[("USE_PROMETHEUS", "true"), ("USE_STATSD", "false")]).unwrap();
        assert!(s.use_prometheus);
        let e = settings(&[("USE_DOG_STATSD", "true")]).unwrap_err();
        assert!(e.0.starts_with("USE_DOG_STATSD: one stats sink"), "{e}");
        let s = settings(&[("USE_DOG_STATSD", "true"), ("USE_STATSD", "false")]).unwrap();
        assert!(s.use_dog_statsd && !s.use_statsd);
    }

    #[test]
    fn stats_settings_as_the_reference_reads_them() {
        let s = settings(&[]).unwrap();
        assert!(s.extra_tags.is_empty() && s.prometheus_mapper_yaml.is_empty());
        assert!(!s.prometheus_response_time_as_milliseconds && !s.use_dog_statsd);
        assert_eq!(s.local_cache_size_in_bytes, 0);
        let s = settings(&[
            ("EXTRA_TAGS", "foo:bar,a:b,foo:baz"),
            ("LOCAL_CACHE_SIZE_IN_BYTES", "1048576"),
            ("PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", "true"),
        ])
        .unwrap();
        let tags: Vec<(&str, &str)> = s
            .extra_tags
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(tags, [("a", "b"), ("foo", "baz")], "the last value wins");
        assert_eq!(s.local_cache_size_in_bytes, 1 << 20);
        assert!(s.prometheus_response_time_as_milliseconds);
        assert!(settings(&[("EXTRA_TAGS", " ")])
            .unwrap()
            .extra_tags
            .is_empty());
        // envconfig's map: each item exactly one colon.
        for (bad, item) in [("a:b,c", "c"), ("a:b:c", "a:b:c"), ("a:b,", "")] {
            assert_eq!(
                settings(&[("EXTRA_TAGS", bad)]).unwrap_err().0,
                format!("EXTRA_TAGS: invalid map item: {item:?} (expected k:v,k2:v2)")
            );
        }
        assert_eq!(
            settings(&[("LOCAL_CACHE_SIZE_IN_BYTES", "-1")])
                .unwrap_err()
                .0,
            "LOCAL_CACHE_SIZE_IN_BYTES: invalid number '-1'"
        );
    }

    #[test]
    fn bad_values_name_their_variable() {
        assert_eq!(
            settings(&[("GRPC_PORT", "http")]).unwrap_err().0,
            "GRPC_PORT: invalid number 'http'"
        );
        assert_eq!(
            settings(&[("SHADOW_MODE", "yes")]).unwrap_err().0,
            "SHADOW_MODE: invalid boolean 'yes' (expected true or false)"
        );
        assert!(settings(&[("NEAR_LIMIT_RATIO", "1.5")]).is_err());
        assert!(settings(&[("BACKEND_TYPE", "memcache")]).is_err());
        assert_eq!(
            settings(&[("HTTP_MAX_CONNECTIONS", "0")]).unwrap_err().0,
            "HTTP_MAX_CONNECTIONS: must be at least 1"
        );
        assert_eq!(
            settings(&[("GRPC_HANDSHAKE_TIMEOUT", "0")]).unwrap_err().0,
            "GRPC_HANDSHAKE_TIMEOUT: must be longer than 0"
        );
    }

    #[test]
    fn connection_and_load_bounds_default_to_safe_values() {
        let s = settings(&[]).unwrap();
        assert_eq!(s.grpc_max_connection_age, Duration::from_secs(24 * 3600));
        assert_eq!(s.grpc_max_connection_age_grace, Duration::from_secs(3600));
        assert_eq!(
            (s.http_max_connections, s.grpc_max_connections),
            (256, 4096)
        );
        assert_eq!(s.http_read_timeout, Duration::from_secs(10));
        assert_eq!(s.grpc_handshake_timeout, Duration::from_secs(10));
        assert_eq!(s.grpc_request_timeout, Duration::from_secs(30));
        assert_eq!(s.runtime_max_file_bytes, 1 << 20);
        assert_eq!(s.runtime_max_total_bytes, 4 << 20);
        assert_eq!(s.runtime_max_depth, 64);
        assert_eq!(s.stats_max_keys, 10_000);
    }

    #[test]
    fn go_durations() {
        assert_eq!(parse_duration("10s"), Some(Duration::from_secs(10)));
        assert_eq!(parse_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration("0"), Some(Duration::ZERO));
        assert_eq!(parse_duration("10"), None);
        assert_eq!(parse_duration("1y"), None);
        // Too large for a Duration, or for an Instant plus it: refused,
        // never a panic (at start, or in every connection's deadline).
        assert_eq!(parse_duration("99999999999999999999999h"), None);
        assert_eq!(parse_duration(&format!("1{}s", "0".repeat(400))), None);
        assert_eq!(parse_duration("876001h"), None);
        assert_eq!(
            parse_duration("876000h"),
            Some(Duration::from_secs(876_000 * 3600))
        );
        assert!(settings(&[("GRPC_MAX_CONNECTION_IDLE", "99999999999999999999999h")]).is_err());
        for name in ["STATS_FLUSH_INTERVAL", "RUNTIME_POLL_INTERVAL"] {
            assert_eq!(
                settings(&[(name, "0")]).unwrap_err().0,
                format!("{name}: must be longer than 0")
            );
        }
    }

    #[test]
    fn service_settings_with_the_references_names_and_defaults() {
        let s = settings(&[]).unwrap();
        assert_eq!(s.grpc_uds, "");
        assert!(!s.response_dynamic_metadata && !s.redis_health_check_active_connection);
        assert_eq!(
            s.redis_startup,
            StartupRetry {
                initial_interval: Duration::from_secs(1),
                max_interval: Duration::from_secs(30),
                max_elapsed: Duration::ZERO,
            }
        );
        let s = settings(&[
            ("GRPC_UDS", "/run/ratelimit.sock"),
            ("RESPONSE_DYNAMIC_METADATA", "true"),
            ("REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", "1"),
            ("REDIS_STARTUP_INITIAL_INTERVAL", "250ms"),
            ("REDIS_STARTUP_MAX_INTERVAL", "1m"),
            ("REDIS_STARTUP_MAX_ELAPSED_TIME", "2m30s"),
        ])
        .unwrap();
        assert_eq!(s.grpc_uds, "/run/ratelimit.sock");
        assert!(s.response_dynamic_metadata && s.redis_health_check_active_connection);
        assert_eq!(
            s.redis_startup,
            StartupRetry {
                initial_interval: Duration::from_millis(250),
                max_interval: Duration::from_secs(60),
                max_elapsed: Duration::from_secs(150),
            }
        );
        assert_eq!(
            settings(&[("REDIS_STARTUP_MAX_ELAPSED_TIME", "30")])
                .unwrap_err()
                .0,
            "REDIS_STARTUP_MAX_ELAPSED_TIME: invalid duration '30' (Go's syntax, e.g. 10s or 1h30m; at most 876000h)"
        );
        assert_eq!(
            settings(&[("RESPONSE_DYNAMIC_METADATA", "on")])
                .unwrap_err()
                .0,
            "RESPONSE_DYNAMIC_METADATA: invalid boolean 'on' (expected true or false)"
        );
    }

    #[test]
    fn tls_settings_with_the_references_names() {
        let s = settings(&[]).unwrap();
        assert_eq!(s.grpc_tls, GrpcTlsSettings::default());
        assert!(!s.redis.tls && s.redis.tls_cacert.is_empty());
        let s = settings(&[
            ("GRPC_SERVER_USE_TLS", "true"),
            ("GRPC_SERVER_TLS_CERT", "/certs/tls.crt"),
            ("GRPC_SERVER_TLS_KEY", "/certs/tls.key"),
            ("GRPC_SERVER_TLS_CA_CERT", "/certs/ca.crt"),
            ("GRPC_CLIENT_TLS_CACERT", "/ca.crt"),
            ("GRPC_CLIENT_TLS_SAN", "envoy"),
            ("REDIS_TLS", "true"),
            ("REDIS_TLS_CLIENT_CERT", "/redis-certs/tls.crt"),
            ("REDIS_TLS_CLIENT_KEY", "/redis-certs/tls.key"),
            ("REDIS_TLS_CACERT", "/redis-certs/ca.crt"),
            ("REDIS_PERSECOND", "true"),
        ])
        .unwrap();
        assert!(s.grpc_tls.enabled);
        assert_eq!(
            (s.grpc_tls.cert.as_str(), s.grpc_tls.key.as_str()),
            ("/certs/tls.crt", "/certs/tls.key")
        );
        assert_eq!(s.grpc_tls.server_ca_cert, "/certs/ca.crt");
        assert_eq!(
            (
                s.grpc_tls.client_cacert.as_str(),
                s.grpc_tls.client_san.as_str()
            ),
            ("/ca.crt", "envoy")
        );
        assert_eq!(s.redis.tls_client_cert, "/redis-certs/tls.crt");
        assert_eq!(s.redis.tls_client_key, "/redis-certs/tls.key");
        // The per-second Redis takes the same files (its own REDIS_PERSECOND_TLS).
        let ps = s.redis_per_second.unwrap();
        assert!(!ps.tls);
        assert_eq!(ps.tls_cacert, "/redis-certs/ca.crt");
        assert_eq!(
            settings(&[("GRPC_SERVER_USE_TLS", "true")]).unwrap_err().0,
            "GRPC_SERVER_USE_TLS: GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY are both needed"
        );
    }

    #[test]
    fn redis_urls_from_the_references_settings() {
        let mut r = settings(&[]).unwrap().redis;
        r.socket_type = "tcp".into();
        assert_eq!(redis_url(&r, "127.0.0.1:6379"), "redis://127.0.0.1:6379");
        r.auth = "secret".into();
        assert_eq!(redis_url(&r, "h:1"), "redis://:secret@h:1");
        r.auth = "user:pw".into();
        r.tls = true;
        r.tls_skip_hostname_verification = true;
        assert_eq!(redis_url(&r, "h:1"), "rediss://user:pw@h:1/#insecure");
        r.socket_type = "unix".into();
        r.tls = false;
        assert_eq!(redis_url(&r, "/tmp/r.sock"), "unix:///tmp/r.sock");
        assert_eq!(split_addr(":9090"), Some(("0.0.0.0".into(), 9090)));
        assert_eq!(split_addr("127.0.0.1:1"), Some(("127.0.0.1".into(), 1)));
    }
}
