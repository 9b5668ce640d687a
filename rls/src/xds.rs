//! `CONFIG_TYPE=GRPC_XDS_SOTW`: the configuration pushed by an xDS
//! management server, as envoyproxy/ratelimit takes it. The service is an
//! ADS client (`envoy.service.discovery.v3.AggregatedDiscoveryService/
//! StreamAggregatedResources`) that asks for `RateLimitConfig` resources
//! (state of the world: each response holds every config). Each response
//! is converted to the YAML a config file holds and loaded through the same
//! code as the files; a config that loads is ACKed (`version_info` and
//! `response_nonce` of the response), one that does not is NACKed with the
//! load's error text in `error_detail`, and the last good one stays.
//!
//! A lost stream is opened again after `XDS_CLIENT_BACKOFF_*`; a connection
//! that cannot be made is tried again every
//! `CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL` (with jitter).

pub mod pb;
mod tls;

use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use envoy_types::pb::google::protobuf::{value::Kind, Struct, Value as PbValue};
use envoy_types::pb::google::rpc::Status as RpcStatus;
use prost::Message;
use tonic::metadata::{AsciiMetadataKey, AsciiMetadataValue};
use tonic::transport::{Channel, Endpoint};

use crate::config::{Config, ConfigFile};
use crate::log;
use crate::service::State;
use crate::settings::{parse_duration, SettingsError};

/// The reference's xDS client settings (its variable names and defaults).
#[derive(Clone, Debug, PartialEq)]
pub struct XdsSettings {
    pub node_id: String,
    /// `CONFIG_GRPC_XDS_NODE_METADATA`: `k=v` pairs separated by `,`.
    pub node_metadata: Vec<(String, String)>,
    pub server_url: String,
    pub connect_retry_interval: Duration,
    /// `CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS`: `k:v` pairs separated
    /// by `,`, sent as the stream's gRPC metadata.
    pub additional_headers: Vec<(String, String)>,
    pub use_tls: bool,
    pub client_tls_cert: String,
    pub client_tls_key: String,
    pub server_tls_cacert: String,
    pub server_tls_san: String,
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    pub backoff_factor: f64,
    pub backoff_jitter: bool,
    /// `XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES` (0: gRPC's 4 MiB).
    pub max_msg_size: usize,
}

impl XdsSettings {
    pub fn from_lookup(
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<XdsSettings, SettingsError> {
        let st = |k: &str, d: &str| lookup(k).unwrap_or_else(|| d.to_string());
        let dur = |k: &str, d: Duration| -> Result<Duration, SettingsError> {
            match lookup(k) {
                None => Ok(d),
                Some(v) => parse_duration(&v).ok_or_else(|| {
                    SettingsError(format!(
                        "{k}: invalid duration '{v}' (Go's syntax, e.g. 10s or 1h30m; at most 876000h)"
                    ))
                }),
            }
        };
        let boolean = |k: &str, d: bool| -> Result<bool, SettingsError> {
            match lookup(k) {
                None => Ok(d),
                Some(v) => match v.to_ascii_lowercase().as_str() {
                    "1" | "t" | "true" => Ok(true),
                    "0" | "f" | "false" => Ok(false),
                    _ => Err(SettingsError(format!(
                        "{k}: invalid boolean '{v}' (expected true or false)"
                    ))),
                },
            }
        };
        let node_metadata = st("CONFIG_GRPC_XDS_NODE_METADATA", "")
            .split(',')
            .filter_map(|e| e.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let name = "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS";
        let mut additional_headers = Vec::new();
        let text = st(name, "");
        if !text.is_empty() {
            for item in text.split(',') {
                let parts: Vec<&str> = item.split(':').collect();
                let [k, v] = parts[..] else {
                    return Err(SettingsError(format!(
                        "{name}: invalid map item: {item:?} (expected key:value pairs separated by ,)"
                    )));
                };
                let k = k.to_ascii_lowercase();
                if k.parse::<AsciiMetadataKey>().is_err()
                    || v.parse::<AsciiMetadataValue>().is_err()
                {
                    return Err(SettingsError(format!(
                        "{name}: {item:?} is not a valid gRPC header"
                    )));
                }
                additional_headers.push((k, v.to_string()));
            }
        }
        let backoff_factor: f64 = match lookup("XDS_CLIENT_BACKOFF_RANDOM_FACTOR") {
            None => 0.5,
            Some(v) => v
                .trim()
                .parse()
                .ok()
                .filter(|f: &f64| f.is_finite())
                .ok_or_else(|| {
                    SettingsError(format!(
                        "XDS_CLIENT_BACKOFF_RANDOM_FACTOR: invalid number '{v}'"
                    ))
                })?,
        };
        let max_msg_size = match lookup("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES") {
            None => 0,
            Some(v) if v.trim().is_empty() => 0,
            Some(v) => v.trim().parse().map_err(|_| {
                SettingsError(format!(
                    "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES: invalid number '{v}'"
                ))
            })?,
        };
        let s = XdsSettings {
            node_id: st("CONFIG_GRPC_XDS_NODE_ID", "default"),
            node_metadata,
            server_url: st("CONFIG_GRPC_XDS_SERVER_URL", "localhost:18000"),
            connect_retry_interval: dur(
                "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL",
                Duration::from_secs(3),
            )?,
            additional_headers,
            use_tls: boolean("CONFIG_GRPC_XDS_SERVER_USE_TLS", false)?,
            client_tls_cert: st("CONFIG_GRPC_XDS_CLIENT_TLS_CERT", ""),
            client_tls_key: st("CONFIG_GRPC_XDS_CLIENT_TLS_KEY", ""),
            server_tls_cacert: st("CONFIG_GRPC_XDS_SERVER_TLS_CACERT", ""),
            server_tls_san: st("CONFIG_GRPC_XDS_SERVER_TLS_SAN", ""),
            backoff_initial: dur(
                "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL",
                Duration::from_secs(10),
            )?,
            backoff_max: dur("XDS_CLIENT_BACKOFF_MAX_INTERVAL", Duration::from_secs(60))?,
            backoff_factor,
            backoff_jitter: boolean("XDS_CLIENT_BACKOFF_JITTER", true)?,
            max_msg_size,
        };
        for (k, d) in [
            (
                "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL",
                s.connect_retry_interval,
            ),
            ("XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", s.backoff_initial),
            ("XDS_CLIENT_BACKOFF_MAX_INTERVAL", s.backoff_max),
        ] {
            // 0 would reconnect in a tight loop.
            if d.is_zero() {
                return Err(SettingsError(format!("{k}: must be longer than 0")));
            }
        }
        if s.use_tls && s.client_tls_cert.is_empty() != s.client_tls_key.is_empty() {
            return Err(SettingsError(
                "CONFIG_GRPC_XDS_CLIENT_TLS_CERT and CONFIG_GRPC_XDS_CLIENT_TLS_KEY go together: set both or neither".into(),
            ));
        }
        Ok(s)
    }
}

/// A small xorshift generator for the retry jitter (no need for more).
pub(crate) struct Jitter(u64);

impl Jitter {
    pub(crate) fn new() -> Jitter {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0x9e37_79b9_7f4a_7c15);
        Jitter(seed | 1)
    }

    /// A number in [0, 1).
    pub(crate) fn next(&mut self) -> f64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        (x >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The wait before reconnecting after the `attempt`-th lost stream, as the
/// reference's backoff computes it: `initial * factor^attempt`, with jitter
/// a random point between `initial` and that, always within
/// [`initial`, `max`] (with the default factor 0.5, always `initial`).
pub fn backoff(x: &XdsSettings, attempt: u32, random: f64) -> Duration {
    let (min, max) = (x.backoff_initial, x.backoff_max);
    if min >= max {
        return max;
    }
    let factor = if x.backoff_factor <= 0.0 {
        2.0
    } else {
        x.backoff_factor
    };
    let minf = min.as_secs_f64();
    let mut d = minf * factor.powf(f64::from(attempt));
    if x.backoff_jitter {
        d = random * (d - minf) + minf;
    }
    if !d.is_finite() || d >= max.as_secs_f64() {
        return max;
    }
    Duration::from_secs_f64(d.max(0.0)).max(min)
}

/// The wait between two connection attempts: the interval, give or take
/// half of it.
fn connect_wait(x: &XdsSettings, random: f64) -> Duration {
    x.connect_retry_interval.mul_f64(0.5 + random)
}

fn node(x: &XdsSettings) -> Node {
    let fields = x
        .node_metadata
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                PbValue {
                    kind: Some(Kind::StringValue(v.clone())),
                },
            )
        })
        .collect();
    Node {
        id: x.node_id.clone(),
        metadata: Some(Struct { fields }),
        ..Default::default()
    }
}

fn request(x: &XdsSettings, version: &str, nonce: &str, error: Option<String>) -> DiscoveryRequest {
    DiscoveryRequest {
        version_info: version.to_string(),
        node: Some(node(x)),
        type_url: pb::TYPE_URL.to_string(),
        response_nonce: nonce.to_string(),
        error_detail: error.map(|message| RpcStatus {
            message,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The configs of one response as the files the loader reads (named by
/// each config's `name`), or why they cannot be read.
pub fn files_of(resp: &DiscoveryResponse) -> Result<Vec<ConfigFile>, String> {
    let mut files = Vec::with_capacity(resp.resources.len());
    for any in &resp.resources {
        if any.type_url != pb::TYPE_URL {
            return Err(format!(
                "mismatched message type: got \"{}\" want \"{}\"",
                any.type_url.rsplit('/').next().unwrap_or_default(),
                "ratelimit.config.ratelimit.v3.RateLimitConfig"
            ));
        }
        let c = pb::RateLimitConfig::decode(any.value.as_slice())
            .map_err(|e| format!("proto: cannot parse invalid wire-format data: {e}"))?;
        let text = pb::to_yaml(&c)?;
        files.push(ConfigFile { name: c.name, text });
    }
    Ok(files)
}

/// Starts the xDS client on the runtime. The receiver turns true once the
/// first response has been loaded or refused by the loader (the service
/// waits for that unless `FORCE_START_WITHOUT_INITIAL_CONFIG`).
pub fn start(state: Arc<State>) -> tokio::sync::watch::Receiver<bool> {
    let (first_tx, first_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(run(state, first_tx));
    first_rx
}

async fn run(state: Arc<State>, first: tokio::sync::watch::Sender<bool>) {
    let x = state.settings.xds.clone();
    let mut jitter = Jitter::new();
    let mut accepted = String::new();
    let mut lost: u32 = 0;
    log::info("Starting xDS client connection for rate limit configurations");
    loop {
        log::info(&format!(
            "Dialing xDS Management Server: '{}'",
            x.server_url
        ));
        let channel = match connect(&x).await {
            Ok(c) => c,
            Err(e) => {
                log::error(&format!(
                    "Error initializing gRPC connection to xDS Management Server: {e}"
                ));
                tokio::time::sleep(connect_wait(&x, jitter.next())).await;
                continue;
            }
        };
        log::info("Connection to xDS Management Server is successful");
        let mut answered = false;
        let e = watch(&state, &x, channel, &mut accepted, &first, &mut answered).await;
        log::error(&format!(
            "Failed to receive configuration from xDS Management Server: {e}"
        ));
        if answered {
            lost = 0;
        }
        let wait = backoff(&x, lost, jitter.next());
        lost = lost.saturating_add(1);
        log::debug(&format!("Sleeping for {wait:?} using exponential backoff"));
        tokio::time::sleep(wait).await;
    }
}

/// The URI of a gRPC target as the reference's dial takes it: `host:port`,
/// or with gRPC's `dns:///` or `passthrough:///` scheme.
fn server_uri(target: &str, tls: bool) -> String {
    let scheme = if tls { "https" } else { "http" };
    let host_port = ["dns:///", "passthrough:///"]
        .iter()
        .find_map(|p| target.strip_prefix(p))
        .unwrap_or(target);
    format!("{scheme}://{host_port}")
}

async fn connect(x: &XdsSettings) -> Result<Channel, String> {
    let endpoint = Endpoint::from_shared(server_uri(&x.server_url, x.use_tls))
        .map_err(|e| format!("CONFIG_GRPC_XDS_SERVER_URL '{}': {e}", x.server_url))?
        .connect_timeout(Duration::from_secs(10))
        // A server that stops answering is gone: the stream ends.
        .http2_keep_alive_interval(Duration::from_secs(30))
        .keep_alive_timeout(Duration::from_secs(20))
        .keep_alive_while_idle(true);
    if x.use_tls {
        return tls::connect(x, endpoint).await;
    }
    endpoint.connect().await.map_err(|e| error_text(&e))
}

/// An error with its causes, which tonic keeps apart.
fn error_text(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let more = s.to_string();
        // Layers often repeat their cause's text.
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = s.source();
    }
    text
}

/// One ADS stream, until it ends: the reason it ended.
async fn watch(
    state: &Arc<State>,
    x: &XdsSettings,
    channel: Channel,
    accepted: &mut String,
    first: &tokio::sync::watch::Sender<bool>,
    answered: &mut bool,
) -> String {
    let (tx, rx) = tokio::sync::mpsc::channel::<DiscoveryRequest>(4);
    // A new stream starts from the last version this service accepted.
    if tx.send(request(x, accepted, "", None)).await.is_err() {
        return "the request stream closed".into();
    }
    let outbound =
        futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|m| (m, rx)) });
    let mut req = tonic::Request::new(outbound);
    for (k, v) in &x.additional_headers {
        if let (Ok(k), Ok(v)) = (k.parse::<AsciiMetadataKey>(), v.parse()) {
            req.metadata_mut().insert(k, v);
        }
    }
    let mut client = AggregatedDiscoveryServiceClient::new(channel);
    if x.max_msg_size > 0 {
        client = client.max_decoding_message_size(x.max_msg_size);
    }
    let mut stream = match client.stream_aggregated_resources(req).await {
        Ok(r) => r.into_inner(),
        Err(e) => return format!("{}: {}", e.code(), e.message()),
    };
    loop {
        let resp = match stream.message().await {
            Ok(Some(r)) => r,
            Ok(None) => return "the server closed the stream".into(),
            Err(e) => return format!("{}: {}", e.code(), e.message()),
        };
        *answered = true;
        log::debug(&format!(
            "Response received from xDS Management Server: version {:?}, {} resources",
            resp.version_info,
            resp.resources.len()
        ));
        let reply = match apply(state, &resp).await {
            Ok(()) => {
                first.send_replace(true);
                accepted.clone_from(&resp.version_info);
                request(x, accepted, &resp.nonce, None)
            }
            Err((text, loaded)) => {
                if loaded {
                    first.send_replace(true);
                }
                request(x, accepted, &resp.nonce, Some(text))
            }
        };
        if tx.send(reply).await.is_err() {
            return "the request stream closed".into();
        }
    }
}

/// Loads one response's configs; on failure, the NACK's text and whether
/// the loader saw it (a resource that cannot be decoded never reaches it).
async fn apply(state: &Arc<State>, resp: &DiscoveryResponse) -> Result<(), (String, bool)> {
    let files = match files_of(resp) {
        Ok(f) => f,
        Err(e) => {
            log::error(&format!(
                "Error while unmarshalling config from xDS Management Server: {e}"
            ));
            return Err((e, false));
        }
    };
    let merge = state.settings.merge_domain_config;
    let st = state.clone();
    let r = tokio::task::spawn_blocking(move || {
        let r = Config::load(&files, merge);
        crate::loader::install(&st, r, "xDS")
    })
    .await;
    match r {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err((e.0, true)),
        Err(e) => Err((format!("the load stopped without a result: {e}"), true)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn xds(vars: &[(&str, &str)]) -> Result<XdsSettings, SettingsError> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        XdsSettings::from_lookup(&move |k| m.get(k).cloned())
    }

    #[test]
    fn defaults_are_the_references() {
        let x = xds(&[]).unwrap();
        assert_eq!(x.node_id, "default");
        assert_eq!(x.server_url, "localhost:18000");
        assert_eq!(x.connect_retry_interval, Duration::from_secs(3));
        assert_eq!(x.backoff_initial, Duration::from_secs(10));
        assert_eq!(x.backoff_max, Duration::from_secs(60));
        assert_eq!(x.backoff_factor, 0.5);
        assert!(x.backoff_jitter && !x.use_tls);
        assert!(x.additional_headers.is_empty() && x.node_metadata.is_empty());
    }

    #[test]
    fn metadata_and_headers_as_the_reference_reads_them() {
        let x = xds(&[
            ("CONFIG_GRPC_XDS_NODE_METADATA", "a=1,b=x=y,c:3"),
            (
                "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS",
                "X-Token:abc,k:v",
            ),
        ])
        .unwrap();
        assert_eq!(
            x.node_metadata,
            vec![("a".into(), "1".into()), ("b".into(), "x=y".into())]
        );
        assert_eq!(
            x.additional_headers,
            vec![("x-token".into(), "abc".into()), ("k".into(), "v".into())]
        );
        let n = node(&x);
        assert_eq!(n.id, "default");
        assert_eq!(n.metadata.unwrap().fields.len(), 2);
        let e = xds(&[("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "a:b:c")]).unwrap_err();
        assert_eq!(
            e.0,
            "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS: invalid map item: \"a:b:c\" (expected key:value pairs separated by ,)"
        );
        assert!(xds(&[("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "a b:c")]).is_err());
        assert!(xds(&[("XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "0")]).is_err());
        let half = [
            ("CONFIG_GRPC_XDS_SERVER_USE_TLS", "true"),
            ("CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "/c"),
        ];
        assert_eq!(
            xds(&half).unwrap_err().0,
            "CONFIG_GRPC_XDS_CLIENT_TLS_CERT and CONFIG_GRPC_XDS_CLIENT_TLS_KEY go together: set both or neither"
        );
        // Read only when TLS is on, as the reference's.
        assert!(xds(&half[1..]).is_ok());
    }

    #[test]
    fn deep_or_duplicate_configs_are_refused_with_a_text() {
        let deep = |levels: usize| {
            let mut d = pb::RateLimitDescriptor {
                key: "k".into(),
                ..Default::default()
            };
            for _ in 1..levels {
                d = pb::RateLimitDescriptor {
                    key: "k".into(),
                    descriptors: vec![d],
                    ..Default::default()
                };
            }
            pb::RateLimitConfig {
                name: "deep".into(),
                domain: "d".into(),
                descriptors: vec![d],
            }
        };
        let resp = |cs: &[pb::RateLimitConfig]| DiscoveryResponse {
            resources: cs
                .iter()
                .map(|c| envoy_types::pb::google::protobuf::Any {
                    type_url: pb::TYPE_URL.into(),
                    value: c.encode_to_vec(),
                })
                .collect(),
            ..Default::default()
        };
        // Past the decoder's nesting limit: refused before any YAML.
        assert!(files_of(&resp(&[deep(200)])).is_err());
        // Within it, the loader refuses or takes it, never panics.
        let files = files_of(&resp(&[deep(90)])).unwrap();
        let _ = Config::load(&files, false);
        let files = files_of(&resp(&[deep(10)])).unwrap();
        assert!(Config::load(&files, false).is_ok());
        let two = files_of(&resp(&[deep(1), deep(1)])).unwrap();
        assert_eq!(
            Config::load(&two, false).unwrap_err().0,
            "deep: duplicate domain 'd' in config file"
        );
        // Merged, one domain's descriptors may not repeat either.
        assert_eq!(
            Config::load(&two, true).unwrap_err().0,
            "deep: duplicate descriptor composite key 'd.k'"
        );
        let mut other = deep(1);
        other.descriptors[0].key = "k2".into();
        let two = files_of(&resp(&[deep(1), other])).unwrap();
        assert!(Config::load(&two, true).unwrap().has_domain("d"));
    }

    #[test]
    fn server_targets_as_grpc_dials_them() {
        assert_eq!(
            server_uri("localhost:18000", false),
            "http://localhost:18000"
        );
        assert_eq!(server_uri("dns:///eg:18001", true), "https://eg:18001");
        assert_eq!(
            server_uri("passthrough:///[::1]:1", false),
            "http://[::1]:1"
        );
    }

    #[test]
    fn config_type_is_file_or_xds() {
        let settings = |v: &str| {
            let v = v.to_string();
            crate::settings::Settings::from_lookup(&move |k| {
                (k == "CONFIG_TYPE").then(|| v.clone())
            })
        };
        assert_eq!(
            settings("GRPC_XDS_SOTW").unwrap().config_type,
            "GRPC_XDS_SOTW"
        );
        assert_eq!(
            settings("GRPC_XDS_DELTA").unwrap_err().0,
            "CONFIG_TYPE: invalid setting 'GRPC_XDS_DELTA' (FILE or GRPC_XDS_SOTW)"
        );
        let none = crate::settings::Settings::from_lookup(&|_| None).unwrap();
        assert_eq!(none.config_type, "FILE");
        assert_eq!(none.xds, xds(&[]).unwrap());
    }

    #[test]
    fn backoff_follows_the_references_formula() {
        let mut x = xds(&[]).unwrap();
        // The default factor (0.5) shrinks: every wait is the initial one.
        for a in 0..5 {
            assert_eq!(backoff(&x, a, 0.99), Duration::from_secs(10));
        }
        x.backoff_factor = 2.0;
        x.backoff_jitter = false;
        assert_eq!(backoff(&x, 0, 0.0), Duration::from_secs(10));
        assert_eq!(backoff(&x, 1, 0.0), Duration::from_secs(20));
        assert_eq!(backoff(&x, 3, 0.0), Duration::from_secs(60));
        assert_eq!(backoff(&x, u32::MAX, 0.0), Duration::from_secs(60));
        x.backoff_jitter = true;
        assert_eq!(backoff(&x, 1, 0.5), Duration::from_secs(15));
        assert_eq!(connect_wait(&x, 0.0), Duration::from_millis(1500));
    }

    #[test]
    fn a_resource_of_another_type_or_broken_is_refused() {
        use envoy_types::pb::google::protobuf::Any;
        let mut resp = DiscoveryResponse {
            resources: vec![Any {
                type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster".into(),
                value: vec![],
            }],
            ..Default::default()
        };
        let e = files_of(&resp).unwrap_err();
        assert!(e.starts_with("mismatched message type"), "{e}");
        resp.resources[0].type_url = pb::TYPE_URL.into();
        resp.resources[0].value = vec![0x0a, 0xff];
        assert!(files_of(&resp).is_err());
        resp.resources[0].value = pb::RateLimitConfig {
            name: "n".into(),
            domain: "d".into(),
            descriptors: vec![],
        }
        .encode_to_vec();
        let f = files_of(&resp).unwrap();
        assert_eq!(f[0].name, "n");
    }
}
