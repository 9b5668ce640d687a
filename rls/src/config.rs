//! The ratelimit configuration: envoyproxy/ratelimit's YAML, validated with
//! its rules and error texts, and matched with its rules (key+value before
//! key only, wildcards, depth). Pure: no I/O, no clock, no Redis.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use serde_yaml::Value;

/// A limit's time unit, with the proto's numbering.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Second,
    Minute,
    Hour,
    Day,
    Week,
    Month,
    Year,
}

impl Unit {
    /// The unit named in a config file (any case), as the reference reads it.
    pub fn parse(name: &str) -> Option<Unit> {
        Some(match name.to_ascii_uppercase().as_str() {
            "SECOND" => Unit::Second,
            "MINUTE" => Unit::Minute,
            "HOUR" => Unit::Hour,
            "DAY" => Unit::Day,
            "WEEK" => Unit::Week,
            "MONTH" => Unit::Month,
            "YEAR" => Unit::Year,
            _ => return None,
        })
    }

    /// The proto enum value (`envoy.service.ratelimit.v3.RateLimitResponse.RateLimit.Unit`).
    pub fn proto(self) -> i32 {
        match self {
            Unit::Second => 1,
            Unit::Minute => 2,
            Unit::Hour => 3,
            Unit::Day => 4,
            Unit::Month => 5,
            Unit::Year => 6,
            Unit::Week => 7,
        }
    }

    pub fn from_proto(v: i32) -> Option<Unit> {
        Some(match v {
            1 => Unit::Second,
            2 => Unit::Minute,
            3 => Unit::Hour,
            4 => Unit::Day,
            5 => Unit::Month,
            6 => Unit::Year,
            7 => Unit::Week,
            _ => return None,
        })
    }

    /// Seconds in one unit, as the reference divides time: a month is 30
    /// days and a year 365, windows aligned to multiples since the epoch.
    pub fn seconds(self) -> u64 {
        match self {
            Unit::Second => 1,
            Unit::Minute => 60,
            Unit::Hour => 3600,
            Unit::Day => 86_400,
            Unit::Week => 7 * 86_400,
            Unit::Month => 30 * 86_400,
            Unit::Year => 365 * 86_400,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Unit::Second => "SECOND",
            Unit::Minute => "MINUTE",
            Unit::Hour => "HOUR",
            Unit::Day => "DAY",
            Unit::Week => "WEEK",
            Unit::Month => "MONTH",
            Unit::Year => "YEAR",
        }
    }
}

/// Which redis-cell limiter enforces a rule (an extension: the reference has
/// fixed windows only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    FixedWindow,
    SlidingWindow,
    Gcra,
}

impl Algorithm {
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::FixedWindow => "fixed_window",
            Algorithm::SlidingWindow => "sliding_window",
            Algorithm::Gcra => "gcra",
        }
    }
}

/// One configured (or overridden) limit, as matched for a descriptor.
#[derive(Clone, Debug, PartialEq)]
pub struct RateLimit {
    /// The stats key: `domain.key_value.key2...`.
    pub full_key: String,
    pub requests_per_unit: u32,
    /// `None` only when unlimited.
    pub unit: Option<Unit>,
    /// Windows of several units (extension; 1 in the reference).
    pub unit_multiplier: u32,
    pub algorithm: Algorithm,
    /// GCRA's `burst` (extension): `CL.THROTTLE`'s max_burst, when given.
    pub burst: Option<u32>,
    pub unlimited: bool,
    pub shadow_mode: bool,
    pub quota_mode: bool,
    pub name: String,
    pub replaces: Vec<String>,
    pub detailed_metric: bool,
    /// For entries matched through a `share_threshold` wildcard, the
    /// wildcard value that stands for the request's value in the cache key.
    pub share_threshold_pattern: Option<Vec<String>>,
    /// Whether the limit came from the request's `limit` override.
    pub is_override: bool,
    /// `policy` (extension): the `CL.POLICY` whose limiter decides in
    /// place of this one while it exists (the call adds `POLICY name`);
    /// the configured numbers apply when it does not.
    pub policy: Option<String>,
    /// The descriptor's `metadata` (a map, as JSON), which
    /// `RESPONSE_DYNAMIC_METADATA` adds to a response it passes.
    pub metadata: Option<Arc<serde_json::Map<String, serde_json::Value>>>,
}

impl RateLimit {
    /// A limit as the reference knows them, and as a request's override
    /// gives one: `requests_per_unit` in a fixed window of one `unit`,
    /// nothing else set.
    pub fn fixed_window(full_key: String, requests_per_unit: u32, unit: Unit) -> RateLimit {
        RateLimit {
            full_key,
            requests_per_unit,
            unit: Some(unit),
            unit_multiplier: 1,
            algorithm: Algorithm::FixedWindow,
            burst: None,
            unlimited: false,
            shadow_mode: false,
            quota_mode: false,
            name: String::new(),
            replaces: Vec::new(),
            detailed_metric: false,
            share_threshold_pattern: None,
            is_override: false,
            policy: None,
            metadata: None,
        }
    }

    /// A copy of this limit without its stats key (the matcher names the
    /// key of each match: copying the rule's first would be wasted).
    fn without_key(&self) -> RateLimit {
        RateLimit {
            full_key: String::new(),
            requests_per_unit: self.requests_per_unit,
            unit: self.unit,
            unit_multiplier: self.unit_multiplier,
            algorithm: self.algorithm,
            burst: self.burst,
            unlimited: self.unlimited,
            shadow_mode: self.shadow_mode,
            quota_mode: self.quota_mode,
            name: self.name.clone(),
            replaces: self.replaces.clone(),
            detailed_metric: self.detailed_metric,
            share_threshold_pattern: self.share_threshold_pattern.clone(),
            is_override: self.is_override,
            policy: self.policy.clone(),
            metadata: self.metadata.clone(),
        }
    }

    /// The window length in seconds.
    pub fn window_seconds(&self) -> u64 {
        self.unit
            .map(|u| u.seconds().saturating_mul(u64::from(self.unit_multiplier)))
            .unwrap_or(0)
    }

    /// Whether this limit needs anything the reference cannot do.
    pub fn is_extended(&self) -> bool {
        self.algorithm != Algorithm::FixedWindow || self.unit_multiplier != 1
    }

    /// GCRA's `max_burst` (the bucket holds `max_burst + 1`): the
    /// configured `burst`, else `requests_per_unit - 1`.
    pub fn max_burst(&self) -> u64 {
        if let Some(b) = self.burst {
            u64::from(b)
        } else {
            u64::from(self.requests_per_unit.saturating_sub(1))
        }
    }

    /// The most hits one request can take on an empty limiter: the limit,
    /// or for GCRA the bucket (`max_burst + 1`). A request of more can
    /// never be allowed.
    pub fn capacity(&self) -> u64 {
        match self.algorithm {
            Algorithm::Gcra => self.max_burst() + 1,
            _ => u64::from(self.requests_per_unit),
        }
    }
}

/// 2100-01-01T00:00:00Z, in seconds since the epoch.
pub const HORIZON_SECS: u64 = 4_102_444_800;

/// The longest span a rule's state may cover, in nanoseconds: the module
/// computes in 64-bit nanoseconds since the epoch (they end in 2262) and
/// refuses a call whose window, or whose GCRA bucket's time to empty,
/// would end past them. A rule within this span works for every call
/// until [`HORIZON_SECS`].
pub const MAX_SPAN_NANOS: u64 = i64::MAX as u64 - HORIZON_SECS * 1_000_000_000;

/// The longest window in whole seconds (5,120,927,236 s, about 162 years).
pub const MAX_WINDOW_SECS: u64 = MAX_SPAN_NANOS / 1_000_000_000;

/// GCRA's emission interval as the module computes it for `period_ns`
/// and `count`: the quotient in double precision, truncated (0 when the
/// rate is above one request per nanosecond, which the module refuses).
pub fn gcra_emission_nanos(period_ns: u64, count: u64) -> u64 {
    if count == 0 {
        return 0;
    }
    (period_ns as f64 / count as f64) as u64
}

/// The module's bounds for one rule (every algorithm): its window, and for
/// GCRA its rate and its bucket; `None` when the module takes it.
fn out_of_range(
    algorithm: Algorithm,
    unit: Unit,
    unit_multiplier: u32,
    requests_per_unit: u32,
    max_burst: u64,
) -> Option<String> {
    let window = unit.seconds() * u64::from(unit_multiplier);
    if window > MAX_WINDOW_SECS {
        return Some(format!(
            "unit_multiplier {unit_multiplier} is out of range for unit {}: a window is at most {MAX_WINDOW_SECS} seconds",
            unit.name()
        ));
    }
    if algorithm != Algorithm::Gcra {
        return None;
    }
    let period = window * 1_000_000_000;
    let emission = gcra_emission_nanos(period, u64::from(requests_per_unit));
    if emission == 0 {
        return Some(format!(
            "algorithm gcra with requests_per_unit {requests_per_unit} is out of range for a window of {window} seconds: at most {period} (one request per nanosecond)"
        ));
    }
    let most = MAX_SPAN_NANOS / emission - 1;
    if max_burst > most {
        return Some(format!(
            "burst {max_burst} is out of range for requests_per_unit {requests_per_unit} per {window} seconds: the bucket must empty within {MAX_WINDOW_SECS} seconds, so burst is at most {most}"
        ));
    }
    None
}

/// A configuration error: `<file name>: <text>`, as the reference words it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

fn err(file: &str, text: impl fmt::Display) -> ConfigError {
    ConfigError(format!("{file}: {text}"))
}

/// Keys the reference accepts anywhere in a file.
const REFERENCE_KEYS: &[&str] = &[
    "domain",
    "key",
    "value",
    "descriptors",
    "rate_limit",
    "unit",
    "requests_per_unit",
    "unlimited",
    "shadow_mode",
    "quota_mode",
    "name",
    "replaces",
    "detailed_metric",
    "value_to_metric",
    "share_threshold",
    "metadata",
];

/// Keys of our extensions (the reference refuses a file that has them).
const EXTENSION_KEYS: &[&str] = &["algorithm", "burst", "unit_multiplier", "policy"];

/// One file to load: its runtime name (`config.foo` for `config/foo.yaml`)
/// and its text.
#[derive(Clone, Debug)]
pub struct ConfigFile {
    pub name: String,
    pub text: String,
}

/// A map by names the configuration gives: Fx hashing, several times
/// cheaper than SipHash on short keys, and no flooding risk (a request's
/// values are only looked up in it, never inserted).
type ConfigMap<V> = HashMap<String, V, rustc_hash::FxBuildHasher>;

#[derive(Clone, Debug, Default)]
struct Node {
    children: ConfigMap<Node>,
    /// Wildcard keys of the children (`key_val*ue`), in file order, split on `*`.
    wildcards: Vec<(String, Vec<String>)>,
    limit: Option<Arc<RateLimit>>,
    value_to_metric: bool,
    share_threshold: bool,
    wildcard_pattern: String,
}

/// A loaded configuration: domains and their descriptor trees.
#[derive(Clone, Debug, Default)]
pub struct Config {
    domains: ConfigMap<Node>,
}

/// One descriptor of a request, as the matcher needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub key: String,
    pub value: String,
}

/// A descriptor's entry as matching and keys read it: an [`Entry`], or a
/// request's own entry read in place (no copy of its strings).
pub trait KeyValue {
    fn key(&self) -> &str;
    fn value(&self) -> &str;
}

impl KeyValue for Entry {
    fn key(&self) -> &str {
        &self.key
    }
    fn value(&self) -> &str {
        &self.value
    }
}

/// The request's `limit` override (`requests_per_unit`, proto unit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Override {
    pub requests_per_unit: u32,
    pub unit: i32,
}

fn validate_keys(file: &str, map: &serde_yaml::Mapping) -> Result<(), ConfigError> {
    for (k, v) in map {
        let Some(key) = k.as_str() else {
            return Err(err(
                file,
                format!("config error, key is not of type string: {}", render(k)),
            ));
        };
        if !REFERENCE_KEYS.contains(&key) && !EXTENSION_KEYS.contains(&key) {
            return Err(err(file, format!("config error, unknown key '{key}'")));
        }
        if key == "metadata" {
            continue;
        }
        match v {
            Value::Sequence(items) => {
                for item in items {
                    match item {
                        Value::Mapping(m) => validate_keys(file, m)?,
                        other => {
                            return Err(err(
                                file,
                                format!(
                                "config error, yaml file contains list of type other than map: {}",
                                render(other)
                            ),
                            ))
                        }
                    }
                }
            }
            Value::Mapping(m) => validate_keys(file, m)?,
            Value::String(_) | Value::Bool(_) | Value::Null => {}
            Value::Number(n) if n.is_i64() || n.is_u64() => {}
            _ => return Err(err(file, "error checking config")),
        }
    }
    Ok(())
}

fn render(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null => "<nil>".to_string(),
        other => serde_yaml::to_string(other)
            .unwrap_or_default()
            .trim()
            .to_string(),
    }
}

/// Typed reads of one YAML map, with the reference's zero values for absent
/// keys and a load error for a value of the wrong type.
struct Fields<'a> {
    file: &'a str,
    map: &'a serde_yaml::Mapping,
}

impl<'a> Fields<'a> {
    fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    fn type_error(&self, key: &str, v: &Value, want: &str) -> ConfigError {
        err(
            self.file,
            format!(
                "error loading config file: cannot unmarshal {} into {want} (key '{key}')",
                render(v)
            ),
        )
    }

    fn string(&self, key: &str) -> Result<String, ConfigError> {
        match self.get(key) {
            None => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            // YAML scalars such as `value: 80` are strings to the reference.
            Some(Value::Number(n)) => Ok(n.to_string()),
            Some(Value::Bool(b)) => Ok(b.to_string()),
            Some(v) => Err(self.type_error(key, v, "string")),
        }
    }

    fn boolean(&self, key: &str) -> Result<bool, ConfigError> {
        match self.get(key) {
            None => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(v) => Err(self.type_error(key, v, "bool")),
        }
    }

    fn uint32(&self, key: &str) -> Result<Option<u32>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(v @ Value::Number(n)) => n
                .as_u64()
                .and_then(|x| u32::try_from(x).ok())
                .map(Some)
                .ok_or_else(|| self.type_error(key, v, "uint32")),
            Some(v) => Err(self.type_error(key, v, "uint32")),
        }
    }

    fn list(&self, key: &str) -> Result<&'a [Value], ConfigError> {
        match self.get(key) {
            None => Ok(&[]),
            Some(Value::Sequence(s)) => Ok(s),
            Some(v) => Err(self.type_error(key, v, "list")),
        }
    }

    fn map(&self, key: &str) -> Result<Option<&'a serde_yaml::Mapping>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Mapping(m)) => Ok(Some(m)),
            Some(v) => Err(self.type_error(key, v, "map")),
        }
    }
}

fn load_descriptors(
    file: &str,
    node: &mut Node,
    parent_key: &str,
    descriptors: &[Value],
) -> Result<(), ConfigError> {
    for d in descriptors {
        let Value::Mapping(map) = d else {
            return Err(err(
                file,
                "error loading config file: descriptors must be a list of maps",
            ));
        };
        let f = Fields { file, map };
        let key = f.string("key")?;
        if key.is_empty() {
            return Err(err(file, "descriptor has empty key"));
        }
        let value = f.string("value")?;
        let final_key = if value.is_empty() {
            key.clone()
        } else {
            format!("{key}_{value}")
        };
        let new_parent_key = format!("{parent_key}{final_key}");
        if node.children.contains_key(&final_key) {
            return Err(err(
                file,
                format!("duplicate descriptor composite key '{new_parent_key}'"),
            ));
        }
        let shadow_mode = f.boolean("shadow_mode")?;
        let quota_mode = f.boolean("quota_mode")?;
        let detailed_metric = f.boolean("detailed_metric")?;
        let value_to_metric = f.boolean("value_to_metric")?;
        let share_threshold = f.boolean("share_threshold")?;
        let metadata = load_metadata(file, f.get("metadata"))?;
        let limit = match f.map("rate_limit")? {
            None => None,
            Some(rl) => Some(Arc::new(RateLimit {
                metadata,
                ..load_rate_limit(
                    file,
                    rl,
                    &new_parent_key,
                    shadow_mode,
                    quota_mode,
                    detailed_metric,
                )?
            })),
        };
        if share_threshold && !final_key.contains('*') {
            return Err(err(
                file,
                format!(
                    "share_threshold can only be used with wildcard values (containing '*'), but found key '{final_key}'"
                ),
            ));
        }
        let wildcard_pattern = if share_threshold {
            final_key.clone()
        } else {
            String::new()
        };
        if final_key.contains('*') {
            node.wildcards.push((
                final_key.clone(),
                final_key.split('*').map(str::to_string).collect(),
            ));
        }
        let mut child = Node {
            limit,
            value_to_metric,
            share_threshold,
            wildcard_pattern,
            ..Node::default()
        };
        load_descriptors(
            file,
            &mut child,
            &format!("{new_parent_key}."),
            f.list("descriptors")?,
        )?;
        node.children.insert(final_key, child);
    }
    Ok(())
}

/// A descriptor's `metadata`: a map of anything, kept as JSON (`None`
/// when absent or empty, as the reference keeps it).
#[allow(clippy::type_complexity)]
fn load_metadata(
    file: &str,
    m: Option<&Value>,
) -> Result<Option<Arc<serde_json::Map<String, serde_json::Value>>>, ConfigError> {
    let Some(m) = m else {
        return Ok(None);
    };
    if !matches!(m, Value::Mapping(_)) {
        return Err(err(
            file,
            format!(
                "error loading config file: cannot unmarshal {} into map (key 'metadata')",
                render(m)
            ),
        ));
    }
    match serde_json::to_value(m) {
        Ok(serde_json::Value::Object(map)) if map.is_empty() => Ok(None),
        Ok(serde_json::Value::Object(map)) => Ok(Some(Arc::new(map))),
        Ok(_) => Ok(None),
        Err(e) => Err(err(file, format!("error parsing metadata: {e}"))),
    }
}

fn load_rate_limit(
    file: &str,
    map: &serde_yaml::Mapping,
    full_key: &str,
    shadow_mode: bool,
    quota_mode: bool,
    detailed_metric: bool,
) -> Result<RateLimit, ConfigError> {
    let f = Fields { file, map };
    let unlimited = f.boolean("unlimited")?;
    let unit_name = f.string("unit")?;
    let unit = Unit::parse(&unit_name);
    if unlimited {
        if unit.is_some() {
            return Err(err(
                file,
                "should not specify rate limit unit when unlimited",
            ));
        }
    } else if unit.is_none() {
        return Err(err(file, format!("invalid rate limit unit '{unit_name}'")));
    }
    let name = f.string("name")?;
    let mut replaces = Vec::new();
    for r in f.list("replaces")? {
        let Value::Mapping(m) = r else {
            return Err(err(
                file,
                "error loading config file: replaces must be a list of maps",
            ));
        };
        let rname = Fields { file, map: m }.string("name")?;
        if rname.is_empty() {
            return Err(err(file, "should not have an empty replaces entry"));
        }
        if rname == name {
            return Err(err(
                file,
                "replaces should not contain name of same descriptor",
            ));
        }
        replaces.push(rname);
    }
    let algorithm = match f.string("algorithm")?.as_str() {
        "" | "fixed_window" => Algorithm::FixedWindow,
        "sliding_window" => Algorithm::SlidingWindow,
        "gcra" => Algorithm::Gcra,
        other => {
            return Err(err(
                file,
                format!(
                    "invalid rate limit algorithm '{other}': expected fixed_window, sliding_window or gcra"
                ),
            ))
        }
    };
    let burst = f.uint32("burst")?;
    if burst.is_some() && algorithm != Algorithm::Gcra {
        return Err(err(file, "burst needs algorithm: gcra"));
    }
    let unit_multiplier = f.uint32("unit_multiplier")?.unwrap_or(1);
    if unit_multiplier == 0 {
        return Err(err(file, "unit_multiplier must be 1 or greater"));
    }
    let requests_per_unit = f.uint32("requests_per_unit")?.unwrap_or(0);
    if algorithm == Algorithm::Gcra && !unlimited && requests_per_unit == 0 {
        return Err(err(
            file,
            "algorithm gcra needs requests_per_unit of 1 or more",
        ));
    }
    let policy = match f.get("policy") {
        None => None,
        Some(_) => Some(f.string("policy")?),
    };
    // The module's rule for policy names (CL.POLICY).
    if let Some(p) = policy.as_deref().filter(|p| {
        p.is_empty()
            || p.len() > 64
            || !p
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
    }) {
        return Err(err(
            file,
            format!(
                "invalid policy name '{p}': 1 to 64 bytes of letters, digits, '_', '.' and '-'"
            ),
        ));
    }
    if unlimited && policy.is_some() {
        return Err(err(file, "should not specify a policy when unlimited"));
    }
    let limit = RateLimit {
        full_key: full_key.to_string(),
        requests_per_unit,
        unit: if unlimited { None } else { unit },
        unit_multiplier,
        algorithm,
        burst,
        unlimited,
        shadow_mode,
        quota_mode,
        name,
        replaces,
        detailed_metric,
        share_threshold_pattern: None,
        is_override: false,
        policy,
        metadata: None,
    };
    if let (false, Some(unit)) = (unlimited, unit) {
        if let Some(text) = out_of_range(
            algorithm,
            unit,
            unit_multiplier,
            requests_per_unit,
            limit.max_burst(),
        ) {
            return Err(err(file, text));
        }
    }
    Ok(limit)
}

/// Whether `value` matches a pattern split on `*` (each `*` matches any
/// run of characters, the empty one included).
fn wildcard_match(parts: &[String], value: &str) -> bool {
    let (Some(first), Some(last)) = (parts.first(), parts.last()) else {
        return false;
    };
    if parts.len() == 1 {
        return first == value;
    }
    if !value.starts_with(first.as_str()) || !value.ends_with(last.as_str()) {
        return false;
    }
    let fixed: usize = parts.iter().map(String::len).sum();
    if value.len() < fixed {
        return false;
    }
    let mut rest = &value[first.len()..value.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part.as_str()) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    true
}

impl Config {
    /// Loads files in order; with `merge`, files of one domain are merged
    /// (a later file's descriptors join the domain's), else refused.
    pub fn load(files: &[ConfigFile], merge: bool) -> Result<Config, ConfigError> {
        let mut config = Config::default();
        for file in files {
            let name = file.name.as_str();
            let root: Value = serde_yaml::from_str(&file.text)
                .map_err(|e| err(name, format!("error loading config file: {e}")))?;
            let root_map = match &root {
                Value::Mapping(m) => m.clone(),
                Value::Null => serde_yaml::Mapping::new(),
                other => {
                    return Err(err(
                        name,
                        format!(
                        "error loading config file: cannot unmarshal {} into the config's root map",
                        render(other)
                    ),
                    ))
                }
            };
            validate_keys(name, &root_map)?;
            let f = Fields {
                file: name,
                map: &root_map,
            };
            let domain = f.string("domain")?;
            if domain.is_empty() {
                return Err(err(name, "config file cannot have empty domain"));
            }
            let descriptors = f.list("descriptors")?;
            if config.domains.contains_key(&domain) && !merge {
                return Err(err(
                    name,
                    format!("duplicate domain '{domain}' in config file"),
                ));
            }
            let node = config.domains.entry(domain.clone()).or_default();
            load_descriptors(name, node, &format!("{domain}."), descriptors)?;
        }
        Ok(config)
    }

    pub fn is_empty(&self) -> bool {
        self.domains.is_empty()
    }

    pub fn has_domain(&self, domain: &str) -> bool {
        self.domains.contains_key(domain)
    }

    /// The policies the rules name, sorted, each once.
    pub fn policies(&self) -> Vec<String> {
        fn walk(node: &Node, out: &mut std::collections::BTreeSet<String>) {
            if let Some(p) = node.limit.as_ref().and_then(|l| l.policy.as_ref()) {
                out.insert(p.clone());
            }
            for child in node.children.values() {
                walk(child, out);
            }
        }
        let mut out = std::collections::BTreeSet::new();
        for node in self.domains.values() {
            walk(node, &mut out);
        }
        out.into_iter().collect()
    }

    /// A readable dump of every limit (the debug port's `/rlconfig`).
    pub fn dump(&self) -> String {
        let mut lines = Vec::new();
        fn walk(node: &Node, lines: &mut Vec<String>) {
            if let Some(l) = &node.limit {
                let mut line = format!(
                    "{}: unit={} requests_per_unit={}, shadow_mode: {}, quota_mode: {}",
                    l.full_key,
                    l.unit.map(Unit::name).unwrap_or("UNKNOWN"),
                    l.requests_per_unit,
                    l.shadow_mode,
                    l.quota_mode
                );
                if let Some(p) = &l.policy {
                    line.push_str(&format!(", policy: {p}"));
                }
                lines.push(line);
            }
            for child in node.children.values() {
                walk(child, lines);
            }
        }
        for node in self.domains.values() {
            walk(node, &mut lines);
        }
        lines.sort();
        let mut out = lines.join("\n");
        out.push('\n');
        out
    }

    /// The limit for one descriptor of a request in `domain`, with the
    /// reference's rules; `None` when no rule matches (the descriptor is
    /// then OK without a limit) or the domain is unknown.
    pub fn get_limit<E: KeyValue>(
        &self,
        domain: &str,
        entries: &[E],
        limit_override: Option<Override>,
    ) -> Option<RateLimit> {
        let root = self.domains.get(domain)?;
        if let Some(o) = limit_override {
            // An override with an unknown unit cannot be windowed: treat
            // it as a limit of one second, as no valid Envoy config sends it.
            let unit = Unit::from_proto(o.unit).unwrap_or(Unit::Second);
            let key = descriptor_key(domain, entries);
            return Some(RateLimit {
                is_override: true,
                ..RateLimit::fixed_window(key, o.requests_per_unit, unit)
            });
        }
        let mut node = root;
        let mut found: Option<RateLimit> = None;
        // Every entry's key and value, and a separator each, fit: the keys
        // are built without growing.
        let room = domain.len()
            + entries
                .iter()
                .map(|e| e.key().len() + e.value().len() + 2)
                .sum::<usize>();
        let mut value_key = String::with_capacity(room);
        value_key.push_str(domain);
        let mut share: HashMap<usize, String> = HashMap::new();
        let mut kv = String::new();
        for (i, entry) in entries.iter().enumerate() {
            kv.clear();
            kv.push_str(entry.key());
            kv.push('_');
            kv.push_str(entry.value());
            let mut next = node.children.get(&kv);
            let mut matched_wildcard: Option<&str> = None;
            if next.is_none() {
                for (wkey, parts) in &node.wildcards {
                    if wildcard_match(parts, &kv) {
                        next = node.children.get(wkey);
                        matched_wildcard = Some(wkey);
                        break;
                    }
                }
            }
            let matched_using_value = next.is_some();
            if next.is_none() {
                next = node.children.get(entry.key());
            }
            if let (Some(_), Some(n)) = (matched_wildcard, next) {
                if n.share_threshold && !n.wildcard_pattern.is_empty() {
                    let prefix = format!("{}_", entry.key());
                    let pat = n
                        .wildcard_pattern
                        .strip_prefix(&prefix)
                        .unwrap_or(&n.wildcard_pattern);
                    share.insert(i, pat.to_string());
                }
            }
            value_key.push('.');
            match next {
                Some(n) => {
                    let value_to_use: &str = if let Some(w) = matched_wildcard {
                        if let Some(p) = share.get(&i) {
                            p
                        } else if n.value_to_metric {
                            entry.value()
                        } else {
                            // The wildcard key without `key_`.
                            w.strip_prefix(entry.key())
                                .and_then(|r| r.strip_prefix('_'))
                                .unwrap_or(w)
                        }
                    } else if matched_using_value || n.value_to_metric {
                        entry.value()
                    } else {
                        ""
                    };
                    value_key.push_str(entry.key());
                    if !value_to_use.is_empty() {
                        value_key.push('_');
                        value_key.push_str(value_to_use);
                    }
                }
                None => value_key.push_str(entry.key()),
            }
            if let Some(n) = next {
                if let Some(l) = &n.limit {
                    if i == entries.len() - 1 {
                        let mut l = l.without_key();
                        if !share.is_empty() {
                            let mut pats = vec![String::new(); entries.len()];
                            for (idx, p) in &share {
                                pats[*idx] = p.clone();
                            }
                            l.share_threshold_pattern = Some(pats);
                        }
                        found = Some(l);
                    }
                }
            }
            match next {
                Some(n) if !n.children.is_empty() => node = n,
                _ => break,
            }
        }
        let mut limit = found?;
        if limit.detailed_metric {
            limit.full_key = match &limit.share_threshold_pattern {
                Some(pats) => {
                    let mut k = domain.to_string();
                    for (i, e) in entries.iter().enumerate() {
                        k.push('.');
                        k.push_str(e.key());
                        match pats.get(i).filter(|p| !p.is_empty()) {
                            Some(p) => {
                                k.push('_');
                                k.push_str(p);
                            }
                            None if !e.value().is_empty() => {
                                k.push('_');
                                k.push_str(e.value());
                            }
                            None => {}
                        }
                    }
                    k
                }
                // Every entry was matched (a limit is found only at the
                // last): `domain.key_value.key2_value2...`.
                None => {
                    let mut k = String::with_capacity(room);
                    k.push_str(domain);
                    for e in entries {
                        k.push('.');
                        k.push_str(e.key());
                        k.push('_');
                        k.push_str(e.value());
                    }
                    k
                }
            };
        } else {
            limit.full_key = value_key;
        }
        Some(limit)
    }
}

/// The stats key of an override: `domain.key_value.key2_value2`.
pub fn descriptor_key<E: KeyValue>(domain: &str, entries: &[E]) -> String {
    let mut k = String::new();
    for e in entries {
        if !k.is_empty() {
            k.push('.');
        }
        k.push_str(e.key());
        if !e.value().is_empty() {
            k.push('_');
            k.push_str(e.value());
        }
    }
    format!("{domain}.{k}")
}

#[cfg(test)]
mod tests;
