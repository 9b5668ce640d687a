//! Stats with the reference's statsd names, exported to Prometheus with the
//! names and labels of its `default_mapper.yaml`, or flushed to statsd.

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::decide::StatDelta;

/// Response-time histogram buckets, in seconds (the Prometheus client's
/// defaults, as statsd_exporter uses them).
const BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

#[derive(Default)]
struct Inner {
    counters: BTreeMap<String, u64>,
    /// Per limit key, the five counters of `LIMIT_STATS` (kept apart so a
    /// request allocates no names).
    limits: std::collections::HashMap<String, [u64; 5]>,
    flushed: BTreeMap<String, u64>,
    /// statsd timer name -> (bucket counts, sum in seconds, count)
    timers: BTreeMap<String, (Vec<u64>, f64, u64)>,
    pending_timings: Vec<(String, f64)>,
}

#[derive(Default)]
pub struct Stats {
    inner: Mutex<Inner>,
    /// Whether timings are kept for a statsd flush (they are not otherwise,
    /// or they would pile up).
    pub statsd: std::sync::atomic::AtomicBool,
}

pub const RL: &str = "ratelimit.service.rate_limit.";

impl Stats {
    pub fn add(&self, name: &str, n: u64) {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        *g.counters.entry(name.to_string()).or_default() += n;
    }

    pub fn get(&self, name: &str) -> u64 {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        Self::all_counters(&g).get(name).copied().unwrap_or(0)
    }

    /// Adds one limit's deltas (every counter exists once the limit is hit,
    /// as the reference creates them together).
    pub fn add_limit(&self, key: &str, d: &StatDelta) {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let add = [
            d.near_limit,
            d.over_limit,
            d.total_hits,
            d.within_limit,
            d.shadow_mode,
        ];
        match g.limits.get_mut(key) {
            Some(c) => {
                for (c, a) in c.iter_mut().zip(add) {
                    *c += a;
                }
            }
            None => {
                g.limits.insert(key.to_string(), add);
            }
        }
    }

    /// Every counter with its statsd name.
    fn all_counters(g: &Inner) -> BTreeMap<String, u64> {
        let mut all = g.counters.clone();
        for (key, c) in &g.limits {
            for (stat, v) in LIMIT_STATS.iter().zip(c) {
                all.insert(format!("{RL}{key}.{stat}"), *v);
            }
        }
        all
    }

    pub fn time(&self, name: &str, secs: f64) {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let t = g
            .timers
            .entry(name.to_string())
            .or_insert_with(|| (vec![0; BUCKETS.len()], 0.0, 0));
        for (i, b) in BUCKETS.iter().enumerate() {
            if secs <= *b {
                t.0[i] += 1;
            }
        }
        t.1 += secs;
        t.2 += 1;
        if self.statsd.load(std::sync::atomic::Ordering::Relaxed) {
            g.pending_timings.push((name.to_string(), secs));
        }
    }

    /// The statsd lines since the last flush: counter deltas and timings.
    pub fn statsd_lines(&self) -> Vec<String> {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let mut lines = Vec::new();
        for (k, v) in Self::all_counters(&g) {
            let last = g.flushed.insert(k.clone(), v).unwrap_or(0);
            if v > last {
                lines.push(format!("{k}:{}|c", v - last));
            }
        }
        for (k, secs) in std::mem::take(&mut g.pending_timings) {
            lines.push(format!("{k}:{}|ms", (secs * 1000.0).round() as u64));
        }
        lines
    }

    /// The Prometheus text exposition.
    pub fn prometheus(&self) -> String {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let mut families: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (k, v) in &Self::all_counters(&g) {
            let (name, labels) = prom_name(k);
            families
                .entry(name.clone())
                .or_default()
                .push(format!("{name}{} {v}", render_labels(&labels)));
        }
        let mut out = String::new();
        for (name, lines) in families {
            out.push_str(&format!("# TYPE {name} counter\n"));
            for l in lines {
                out.push_str(&l);
                out.push('\n');
            }
        }
        for (k, (buckets, sum, count)) in &g.timers {
            let (name, labels) = prom_timer_name(k);
            out.push_str(&format!("# TYPE {name} histogram\n"));
            for (i, b) in BUCKETS.iter().enumerate() {
                let mut l = labels.clone();
                l.push(("le".into(), format!("{b}")));
                out.push_str(&format!(
                    "{name}_bucket{} {}\n",
                    render_labels(&l),
                    buckets[i]
                ));
            }
            let mut l = labels.clone();
            l.push(("le".into(), "+Inf".into()));
            out.push_str(&format!("{name}_bucket{} {count}\n", render_labels(&l)));
            out.push_str(&format!("{name}_sum{} {sum}\n", render_labels(&labels)));
            out.push_str(&format!("{name}_count{} {count}\n", render_labels(&labels)));
        }
        out
    }
}

fn render_labels(labels: &[(String, String)]) -> String {
    if labels.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = labels
        .iter()
        .map(|(k, v)| {
            let v = v
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace('\n', "\\n");
            format!("{k}=\"{v}\"")
        })
        .collect();
    format!("{{{}}}", parts.join(","))
}

/// statsd_exporter's fallback: every character that is not valid in a
/// Prometheus name becomes `_`.
fn escape(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

const LIMIT_STATS: &[&str] = &[
    "near_limit",
    "over_limit",
    "total_hits",
    "within_limit",
    "shadow_mode",
];

/// The Prometheus name and labels of a statsd counter, per the reference's
/// `src/stats/prom/default_mapper.yaml`.
pub fn prom_name(statsd: &str) -> (String, Vec<(String, String)>) {
    if let Some(rest) = statsd.strip_prefix(RL) {
        if let Some((path, stat)) = rest.rsplit_once('.') {
            if LIMIT_STATS.contains(&stat) {
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
                    [domain, key1, key2, ..] => {
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

fn prom_timer_name(statsd: &str) -> (String, Vec<(String, String)>) {
    if let Some(m) = statsd
        .strip_prefix("ratelimit_server.")
        .and_then(|r| r.strip_suffix(".response_time"))
    {
        return (
            "ratelimit_service_response_time_seconds".into(),
            vec![("grpc_method".into(), m.into())],
        );
    }
    (escape(statsd), Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapper_names_and_labels() {
        assert_eq!(
            prom_name("ratelimit.service.rate_limit.rl.remote_address.total_hits"),
            (
                "ratelimit_service_rate_limit_total_hits".into(),
                vec![
                    ("domain".into(), "rl".into()),
                    ("key1".into(), "remote_address".into())
                ]
            )
        );
        let (n, l) = prom_name("ratelimit.service.rate_limit.rl.a_b.c_d.e.over_limit");
        assert_eq!(n, "ratelimit_service_rate_limit_over_limit");
        assert_eq!(l.len(), 3);
        assert_eq!(l[2], ("key2".into(), "c_d".into()));
        assert_eq!(
            prom_name("ratelimit.service.call.should_rate_limit.redis_error").0,
            "ratelimit_service_should_rate_limit_error"
        );
        assert_eq!(
            prom_name("ratelimit.service.config_load_success").0,
            "ratelimit_service_config_load_success"
        );
        assert_eq!(
            prom_name("ratelimit_server.ShouldRateLimit.total_requests").0,
            "ratelimit_service_total_requests"
        );
    }

    #[test]
    fn exposition_and_statsd_deltas() {
        let s = Stats::default();
        s.statsd.store(true, std::sync::atomic::Ordering::Relaxed);
        s.add_limit(
            "rl.k_v",
            &StatDelta {
                total_hits: 3,
                over_limit: 1,
                ..Default::default()
            },
        );
        s.time("ratelimit_server.ShouldRateLimit.response_time", 0.002);
        let text = s.prometheus();
        assert!(text
            .contains("ratelimit_service_rate_limit_total_hits{domain=\"rl\",key1=\"k_v\"} 3\n"));
        assert!(text.contains("# TYPE ratelimit_service_rate_limit_over_limit counter\n"));
        assert!(text.contains(
            "ratelimit_service_response_time_seconds_bucket{grpc_method=\"ShouldRateLimit\",le=\"0.005\"} 1\n"
        ));
        let lines = s.statsd_lines();
        assert!(lines.contains(&"ratelimit.service.rate_limit.rl.k_v.total_hits:3|c".to_string()));
        assert!(lines.contains(&"ratelimit_server.ShouldRateLimit.response_time:2|ms".to_string()));
        assert!(!lines.iter().any(|l| l.contains("near_limit")), "{lines:?}");
        s.add_limit(
            "rl.k_v",
            &StatDelta {
                total_hits: 2,
                ..Default::default()
            },
        );
        assert_eq!(
            s.statsd_lines(),
            vec!["ratelimit.service.rate_limit.rl.k_v.total_hits:2|c".to_string()]
        );
    }
}
