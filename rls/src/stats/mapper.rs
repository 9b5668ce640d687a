//! From statsd names to Prometheus names and labels: the built-in mapping
//! (the reference's `src/stats/prom/default_mapper.yaml`), or a
//! statsd_exporter mapping file (`PROMETHEUS_MAPPER_YAML`), of which the
//! subset the reference's file and Envoy Gateway's use is read: glob and
//! regex matches, `name` and `labels` with `$1`/`${1}` captures,
//! `match_metric_type`, `timer_type`/`observer_type`, `scale`,
//! `histogram_options.buckets`, `action: drop`, and `defaults`. As in
//! statsd_exporter, glob rules (each `*` one dot-separated part) are tried
//! first, in file order, then regex rules (unanchored), in file order; a
//! name no rule maps keeps its own name with every invalid character as
//! `_`.

use serde_yaml::Value;

/// The Prometheus client's default buckets, which statsd_exporter gives a
/// histogram without its own.
pub const DEFAULT_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The largest mapping file read (the reference's files are 4 KB).
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// The deepest nesting read (a mapping file needs 5 levels), counted
/// before the YAML parser, whose time grows with the square of it.
pub const MAX_DEPTH: usize = 32;

/// What a stat is, as statsd_exporter's `match_metric_type` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    /// A timer (a histogram on `/metrics`).
    Observer,
    /// No stat of this service is one: a rule for gauges maps nothing.
    Gauge,
}

/// Where one stat goes.
#[derive(Clone, Debug, PartialEq)]
pub struct Mapped {
    pub name: String,
    /// Sorted by name.
    pub labels: Vec<(String, String)>,
    /// Observations are multiplied by it (timers arrive in milliseconds).
    pub scale: f64,
    pub buckets: Vec<f64>,
}

/// A mapping file, parsed and checked.
#[derive(Debug)]
pub struct Mapper {
    rules: Vec<Rule>,
}

#[derive(Debug)]
struct Rule {
    matcher: Matcher,
    name: String,
    labels: Vec<(String, String)>,
    kind: Option<Kind>,
    scale: Option<f64>,
    buckets: Vec<f64>,
    drop: bool,
}

#[derive(Debug)]
enum Matcher {
    /// Parts separated by dots; `None` is a `*`.
    Glob(Vec<Option<String>>),
    Regex(regex::Regex),
}

/// Why a mapping file is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapperError(pub String);

impl std::fmt::Display for MapperError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn err<T>(m: impl Into<String>) -> Result<T, MapperError> {
    Err(MapperError(m.into()))
}

fn is_name_char(c: char, first: bool) -> bool {
    c.is_ascii_alphabetic() || c == '_' || (!first && c.is_ascii_digit())
}

/// statsd_exporter's `metricNameRE`: a Prometheus name in which `$n` and
/// `${n}` may stand for captures.
fn valid_name_template(name: &str) -> bool {
    let b = name.as_bytes();
    let mut i = 0;
    let mut first = true;
    while i < b.len() {
        if b[i] == b'$' {
            let mut j = i + 1;
            let braced = b.get(j) == Some(&b'{');
            if braced {
                j += 1;
            }
            let digits = b[j..].iter().take_while(|c| c.is_ascii_digit()).count();
            if digits == 0 {
                return false;
            }
            j += digits;
            if braced {
                if b.get(j) != Some(&b'}') {
                    return false;
                }
                j += 1;
            }
            i = j;
        } else if is_name_char(b[i] as char, first) {
            i += 1;
        } else {
            return false;
        }
        first = false;
    }
    !name.is_empty()
}

/// statsd_exporter's `labelNameRE` (`^[a-zA-Z_][a-zA-Z0-9_]+$`: two
/// characters at least).
fn valid_label(k: &str) -> bool {
    k.len() >= 2 && k.chars().enumerate().all(|(i, c)| is_name_char(c, i == 0))
}

/// statsd_exporter's `metricLineRE`: dot-separated parts, each `*` or a
/// name of letters, digits, `_` and `-` (the first not starting with a
/// digit or `-`, the others not with `-`).
fn parse_glob(m: &str) -> Option<Vec<Option<String>>> {
    let mut parts = Vec::new();
    for (i, p) in m.split('.').enumerate() {
        if p == "*" {
            parts.push(None);
            continue;
        }
        let mut cs = p.chars();
        let first = cs.next()?;
        let first_ok =
            first.is_ascii_alphabetic() || first == '_' || (i > 0 && first.is_ascii_digit());
        if !first_ok || !cs.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            return None;
        }
        parts.push(Some(p.to_string()));
    }
    Some(parts)
}

/// Expands `$n`, `${n}` and `$$` in `template` with `caps` (1-based), as
/// Go's `Regexp.Expand` and statsd_exporter's glob formatter do: a `$`
/// followed by a name that is not a capture's number expands to nothing.
fn expand_glob(template: &str, caps: &[&str]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        rest = &rest[at + 1..];
        if let Some(r) = rest.strip_prefix('$') {
            out.push('$');
            rest = r;
            continue;
        }
        let (name, after) = if let Some(r) = rest.strip_prefix('{') {
            match r.find('}') {
                Some(end) => (&r[..end], &r[end + 1..]),
                None => {
                    out.push('$');
                    continue;
                }
            }
        } else {
            let n = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            if n == 0 {
                out.push('$');
                continue;
            }
            (&rest[..n], &rest[n..])
        };
        if let Some(v) = name
            .parse::<usize>()
            .ok()
            .and_then(|i| i.checked_sub(1))
            .and_then(|i| caps.get(i))
        {
            out.push_str(v);
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// statsd_exporter's fallback: a name starting with a digit gets a `_`
/// first, and every character that is not valid in a Prometheus name
/// becomes `_`.
pub fn escape(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 1);
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        out.push('_');
    }
    out.extend(name.chars().map(|c| {
        if c.is_ascii_alphanumeric() || c == '_' {
            c
        } else {
            '_'
        }
    }));
    out
}

fn as_str<'a>(v: &'a Value, what: &str) -> Result<&'a str, MapperError> {
    v.as_str()
        .ok_or_else(|| MapperError(format!("{what}: not a string")))
}

fn as_map<'a>(v: &'a Value, what: &str) -> Result<&'a serde_yaml::Mapping, MapperError> {
    v.as_mapping()
        .ok_or_else(|| MapperError(format!("{what}: not a mapping")))
}

fn as_f64(v: &Value, what: &str) -> Result<f64, MapperError> {
    match v.as_f64() {
        Some(f) if f.is_finite() => Ok(f),
        _ => err(format!("{what}: not a number")),
    }
}

fn key_of<'a>(k: &'a Value, what: &str) -> Result<&'a str, MapperError> {
    k.as_str()
        .ok_or_else(|| MapperError(format!("{what}: a key is not a string")))
}

/// A histogram's bucket bounds: numbers in increasing order.
fn bucket_list(v: &Value, what: &str) -> Result<Vec<f64>, MapperError> {
    let seq = v
        .as_sequence()
        .ok_or_else(|| MapperError(format!("{what}: not a list")))?;
    let b = seq
        .iter()
        .map(|x| as_f64(x, what))
        .collect::<Result<Vec<f64>, _>>()?;
    if b.windows(2).any(|w| w[0] >= w[1]) {
        return err(format!("{what}: not in increasing order"));
    }
    Ok(b)
}

fn buckets_of(v: &Value, what: &str) -> Result<Option<Vec<f64>>, MapperError> {
    let mut out = None;
    for (k, v) in as_map(v, what)? {
        match key_of(k, what)? {
            "buckets" => out = Some(bucket_list(v, &format!("{what}.buckets"))?),
            "native_histogram_bucket_factor" | "native_histogram_max_buckets" => {}
            other => return err(format!("{what}: unknown key '{other}'")),
        }
    }
    Ok(out)
}

fn match_type(v: &Value, what: &str) -> Result<bool, MapperError> {
    match as_str(v, what)? {
        "" | "glob" => Ok(false),
        "regex" => Ok(true),
        other => err(format!("{what}: invalid match type \"{other}\"")),
    }
}

fn observer_type(v: &Value, what: &str) -> Result<(), MapperError> {
    match as_str(v, what)? {
        // Every timer is a histogram here (statsd_exporter's summaries
        // have no equivalent: they are refused rather than changed).
        "" | "histogram" => Ok(()),
        other => err(format!(
            "{what}: \"{other}\" is not supported (timers are histograms)"
        )),
    }
}

impl Mapper {
    /// Reads and checks a mapping file; the error names what is wrong.
    pub fn from_file(path: &str) -> Result<Mapper, MapperError> {
        let meta = std::fs::metadata(path).map_err(|e| MapperError(format!("{path}: {e}")))?;
        // A FIFO would block the start for good; a huge file is a mistake.
        if !meta.is_file() {
            return err(format!("{path}: not a regular file"));
        }
        if meta.len() > MAX_FILE_BYTES {
            return err(format!("{path}: larger than {MAX_FILE_BYTES} bytes"));
        }
        let text =
            std::fs::read_to_string(path).map_err(|e| MapperError(format!("{path}: {e}")))?;
        Mapper::from_yaml(&text).map_err(|e| MapperError(format!("{path}: {e}")))
    }

    pub fn from_yaml(text: &str) -> Result<Mapper, MapperError> {
        let depth = crate::loader::nesting_depth(text);
        if depth > MAX_DEPTH {
            return err(format!("nested {depth} levels deep, more than {MAX_DEPTH}"));
        }
        let doc: Value =
            serde_yaml::from_str(text).map_err(|e| MapperError(format!("invalid YAML: {e}")))?;
        let mut default_regex = false;
        let mut default_buckets = DEFAULT_BUCKETS.to_vec();
        let mut mappings: &[Value] = &[];
        if !doc.is_null() {
            for (k, v) in as_map(&doc, "the file")? {
                match key_of(k, "the file")? {
                    "mappings" => {
                        if !v.is_null() {
                            mappings = v
                                .as_sequence()
                                .ok_or_else(|| MapperError("mappings: not a list".into()))?;
                        }
                    }
                    "defaults" => {
                        for (k, v) in as_map(v, "defaults")? {
                            let key = key_of(k, "defaults")?;
                            let what = format!("defaults.{key}");
                            match key {
                                "match_type" => default_regex = match_type(v, &what)?,
                                "observer_type" | "timer_type" => observer_type(v, &what)?,
                                "histogram_options" => {
                                    if let Some(b) = buckets_of(v, &what)? {
                                        default_buckets = b;
                                    }
                                }
                                // statsd_exporter's older spelling.
                                "buckets" => default_buckets = bucket_list(v, &what)?,
                                "ttl"
                                | "glob_disable_ordering"
                                | "summary_options"
                                | "quantiles" => {}
                                other => return err(format!("defaults: unknown key '{other}'")),
                            }
                        }
                    }
                    other => return err(format!("unknown key '{other}'")),
                }
            }
        }
        let mut rules = Vec::with_capacity(mappings.len());
        for (i, m) in mappings.iter().enumerate() {
            let at = format!("mapping {}", i + 1);
            rules.push(Rule::parse(m, &at, default_regex, &default_buckets)?);
        }
        Ok(Mapper { rules })
    }

    /// Where the statsd name `stat` of `kind` goes: `None` when a rule
    /// drops it.
    pub fn map(&self, stat: &str, kind: Kind) -> Option<Mapped> {
        let fits = |r: &Rule| r.kind.is_none_or(|k| k == kind);
        let mut hit = None;
        let parts: Vec<&str> = stat.split('.').collect();
        for r in self.rules.iter().filter(|r| fits(r)) {
            if let Matcher::Glob(g) = &r.matcher {
                if g.len() != parts.len() {
                    continue;
                }
                let mut caps = Vec::new();
                let ok = g.iter().zip(&parts).all(|(want, got)| match want {
                    None => {
                        caps.push(*got);
                        true
                    }
                    Some(w) => w == got,
                });
                if ok {
                    let labels = r
                        .labels
                        .iter()
                        .map(|(k, t)| (k.clone(), expand_glob(t, &caps)))
                        .collect();
                    hit = Some((r, expand_glob(&r.name, &caps), labels));
                    break;
                }
            }
        }
        if hit.is_none() {
            for r in self.rules.iter().filter(|r| fits(r)) {
                if let Matcher::Regex(re) = &r.matcher {
                    if let Some(c) = re.captures(stat) {
                        let ex = |t: &str| {
                            let mut s = String::new();
                            c.expand(t, &mut s);
                            s
                        };
                        let labels = r.labels.iter().map(|(k, t)| (k.clone(), ex(t))).collect();
                        hit = Some((r, ex(&r.name), labels));
                        break;
                    }
                }
            }
        }
        match hit {
            Some((r, _, _)) if r.drop => None,
            Some((r, name, labels)) => Some(Mapped {
                name: escape(&name),
                labels,
                scale: r.scale.unwrap_or(1.0),
                buckets: r.buckets.clone(),
            }),
            None => Some(Mapped {
                name: escape(stat),
                labels: Vec::new(),
                scale: 1.0,
                buckets: DEFAULT_BUCKETS.to_vec(),
            }),
        }
    }
}

impl Rule {
    fn parse(
        m: &Value,
        at: &str,
        default_regex: bool,
        default_buckets: &[f64],
    ) -> Result<Rule, MapperError> {
        let mut pattern = None;
        let mut regex = default_regex;
        let mut name = None;
        let mut labels = Vec::new();
        let mut kind = None;
        let mut scale = None;
        let mut buckets = None;
        let mut drop = false;
        for (k, v) in as_map(m, at)? {
            let key = key_of(k, at)?;
            let what = format!("{at}: {key}");
            match key {
                "match" => pattern = Some(as_str(v, &what)?.to_string()),
                "match_type" => regex = match_type(v, &what)?,
                "name" => name = Some(as_str(v, &what)?.to_string()),
                "labels" => {
                    for (lk, lv) in as_map(v, &what)? {
                        let lk = key_of(lk, &what)?;
                        if !valid_label(lk) {
                            return err(format!("{at}: invalid label key: {lk}"));
                        }
                        let lv = match lv {
                            Value::String(s) => s.clone(),
                            Value::Number(n) => n.to_string(),
                            Value::Bool(b) => b.to_string(),
                            _ => return err(format!("{what}.{lk}: not a string")),
                        };
                        labels.push((lk.to_string(), lv));
                    }
                }
                "match_metric_type" => {
                    kind = match as_str(v, &what)? {
                        "" => None,
                        "counter" => Some(Kind::Counter),
                        "observer" | "timer" | "histogram" | "distribution" => Some(Kind::Observer),
                        "gauge" => Some(Kind::Gauge),
                        other => return err(format!("{what}: invalid metric type \"{other}\"")),
                    }
                }
                "timer_type" | "observer_type" => observer_type(v, &what)?,
                "scale" => scale = Some(as_f64(v, &what)?),
                "histogram_options" => buckets = buckets_of(v, &what)?,
                "action" => {
                    drop = match as_str(v, &what)? {
                        "" | "map" => false,
                        "drop" => true,
                        other => return err(format!("{what}: invalid action \"{other}\"")),
                    }
                }
                "help" | "ttl" | "summary_options" | "quantiles" => {}
                other => return err(format!("{at}: unknown key '{other}'")),
            }
        }
        labels.sort();
        let Some(pattern) = pattern else {
            return err(format!("{at}: no match"));
        };
        // statsd_exporter asks for a name even of a rule that drops.
        let Some(name) = name.filter(|n| !n.is_empty()) else {
            return err(format!("{at}: metric mapping didn't set a metric name"));
        };
        if !valid_name_template(&name) {
            return err(format!(
                "{at}: metric name '{name}' is not a Prometheus name (letters, digits, _ and $n captures, not starting with a digit)"
            ));
        }
        let matcher = if regex {
            Matcher::Regex(regex::Regex::new(&pattern).map_err(|e| {
                MapperError(format!("{at}: invalid regex {pattern} in mapping: {e}"))
            })?)
        } else {
            Matcher::Glob(
                parse_glob(&pattern)
                    .ok_or_else(|| MapperError(format!("{at}: invalid match: {pattern}")))?,
            )
        };
        Ok(Rule {
            matcher,
            name,
            labels,
            kind,
            scale,
            buckets: buckets.unwrap_or_else(|| default_buckets.to_vec()),
            drop,
        })
    }
}

/// The five stats of a limit key the built-in mapping names.
const MAPPED_LIMIT_STATS: &[&str] = &[
    "near_limit",
    "over_limit",
    "total_hits",
    "within_limit",
    "shadow_mode",
];

/// The prefix of every limit key's stats.
const RL: &str = "ratelimit.service.rate_limit.";

/// The Prometheus name and labels of a statsd counter, per the reference's
/// `src/stats/prom/default_mapper.yaml`.
pub fn prom_name(statsd: &str) -> (String, Vec<(String, String)>) {
    if let Some(rest) = statsd.strip_prefix(RL) {
        if let Some((path, stat)) = rest.rsplit_once('.') {
            if MAPPED_LIMIT_STATS.contains(&stat) {
                let parts: Vec<&str> = path.split('.').collect();
                let name = format!("ratelimit_service_rate_limit_{stat}");
                match parts.as_slice() {
                    [domain, key1] => {
                        return (
                            name,
                            vec![
                                ("domain".into(), domain.to_string()),
                                ("key1".into(), key1.to_string()),
                            ],
                        )
                    }
                    // The mapper's `*` is one dot-separated part: deeper
                    // names (a value with dots, a third level) match no
                    // rule and keep their own escaped name, so two never
                    // share a series.
                    [domain, key1, key2] => {
                        return (
                            name,
                            vec![
                                ("domain".into(), domain.to_string()),
                                ("key1".into(), key1.to_string()),
                                ("key2".into(), key2.to_string()),
                            ],
                        )
                    }
                    _ => {}
                }
            }
        }
    }
    if let Some(err) = statsd.strip_prefix("ratelimit.service.call.should_rate_limit.") {
        if !err.contains('.') {
            return (
                "ratelimit_service_should_rate_limit_error".into(),
                vec![("err_type".into(), err.into())],
            );
        }
    }
    if let Some(m) = statsd
        .strip_prefix("ratelimit_server.")
        .and_then(|r| r.strip_suffix(".total_requests"))
    {
        if !m.contains('.') {
            return (
                "ratelimit_service_total_requests".into(),
                vec![("grpc_method".into(), m.into())],
            );
        }
    }
    (escape(statsd), Vec::new())
}

/// The built-in mapping of a timer (in milliseconds): the response time
/// histogram in seconds (the reference's `scale: 0.001`), or in
/// milliseconds under the same name with `PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS`,
/// as the reference drops that line from its mapping.
pub fn prom_timer(statsd: &str, as_milliseconds: bool) -> Mapped {
    if let Some(m) = statsd
        .strip_prefix("ratelimit_server.")
        .and_then(|r| r.strip_suffix(".response_time"))
    {
        if !m.contains('.') {
            return Mapped {
                name: "ratelimit_service_response_time_seconds".into(),
                labels: vec![("grpc_method".into(), m.into())],
                scale: if as_milliseconds { 1.0 } else { 0.001 },
                buckets: DEFAULT_BUCKETS.to_vec(),
            };
        }
    }
    Mapped {
        name: escape(statsd),
        labels: Vec::new(),
        scale: 1.0,
        buckets: DEFAULT_BUCKETS.to_vec(),
    }
}

#[cfg(test)]
mod tests;
