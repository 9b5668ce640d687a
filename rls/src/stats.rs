//! Stats with the reference's statsd names, exported to Prometheus with the
//! names and labels of its `default_mapper.yaml`, or flushed to statsd.
//!
//! Every counter is an atomic that saturates at 2^64-1. A request only
//! takes a read lock to find its counters (a write lock the first time a key
//! is seen); a scrape or a flush copies the values under a read lock and
//! formats them after releasing it, so it never holds up a request. The
//! number of keys is bounded: past `max_keys` limit keys, a new key's hits
//! count in its domain's `_overflow` key, and every unknown domain counts in
//! one `domain_not_found` series.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use crate::decide::StatDelta;

/// Response-time histogram buckets, in seconds (the Prometheus client's
/// defaults, as statsd_exporter uses them).
const BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The default of `STATS_MAX_KEYS`.
pub const DEFAULT_MAX_KEYS: usize = 10_000;

/// The key that counts the hits of limit keys beyond the cap, per domain.
pub const OVERFLOW_KEY: &str = "_overflow";

/// The longest limit key with its own series; a longer one counts in its
/// domain's `_overflow` key.
pub const MAX_KEY_BYTES: usize = 1024;

/// The key that counts, for `key`'s domain, the keys past the cap.
fn overflow_key(key: &str) -> String {
    let domain = key.split_once('.').map(|(d, _)| d).unwrap_or(key);
    format!("{domain}.{OVERFLOW_KEY}")
}

/// The one series of every domain no configuration names.
pub const DOMAIN_NOT_FOUND: &str = "ratelimit.service.rate_limit.domain_not_found";

/// Where named counters beyond the cap go.
pub const COUNTER_OVERFLOW: &str = "ratelimit.service.stats_overflow";

/// Timings kept between two statsd flushes, at most: beyond it a flush
/// reports the first ones and the rest are dropped.
const MAX_PENDING_TIMINGS: usize = 100_000;

type Counter = Arc<AtomicU64>;
type LimitCounters = Arc<[AtomicU64; 5]>;

struct Timer {
    buckets: Vec<u64>,
    sum: f64,
    count: u64,
}

#[derive(Default)]
struct Limits {
    map: HashMap<String, LimitCounters>,
    /// Keys with their own counters (not overflow keys).
    own: usize,
}

pub struct Stats {
    counters: RwLock<HashMap<String, Counter>>,
    /// Per limit key, the five counters of `LIMIT_STATS` (kept apart so a
    /// request allocates no names).
    limits: RwLock<Limits>,
    /// What the last statsd flush reported; only the flush touches it.
    flushed: Mutex<HashMap<String, u64>>,
    /// statsd timer name -> histogram (a handful of names).
    timers: Mutex<BTreeMap<String, Timer>>,
    pending_timings: Mutex<Vec<(String, f64)>>,
    max_keys: usize,
    /// Whether timings are kept for a statsd flush (they are not otherwise,
    /// or they would pile up).
    pub statsd: AtomicBool,
}

impl Default for Stats {
    fn default() -> Self {
        Stats::new(DEFAULT_MAX_KEYS)
    }
}

pub const RL: &str = "ratelimit.service.rate_limit.";

fn saturating_add(c: &AtomicU64, n: u64) {
    if n == 0 {
        return;
    }
    let _ = c.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
        Some(v.saturating_add(n))
    });
}

fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}

fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|e| e.into_inner())
}

fn lock<T>(l: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    l.lock().unwrap_or_else(|e| e.into_inner())
}

impl Stats {
    /// Stats that keep their own series for at most `max_keys` limit keys
    /// (and as many named counters).
    pub fn new(max_keys: usize) -> Stats {
        Stats {
            counters: RwLock::default(),
            limits: RwLock::default(),
            flushed: Mutex::default(),
            timers: Mutex::default(),
            pending_timings: Mutex::default(),
            max_keys: max_keys.max(1),
            statsd: AtomicBool::new(false),
        }
    }

    pub fn add(&self, name: &str, n: u64) {
        // A client names any domain it likes: one series for all of them.
        let name = if name.starts_with(RL) && name.ends_with(".domain_not_found") {
            DOMAIN_NOT_FOUND
        } else {
            name
        };
        if let Some(c) = read(&self.counters).get(name) {
            return saturating_add(c, n);
        }
        let mut g = write(&self.counters);
        let name = if g.len() >= self.max_keys && !g.contains_key(name) {
            COUNTER_OVERFLOW
        } else {
            name
        };
        let c = g.entry(name.to_string()).or_default();
        saturating_add(c, n);
    }

    pub fn get(&self, name: &str) -> u64 {
        self.snapshot().get(name).copied().unwrap_or(0)
    }

    /// The number of limit keys with their own counters (overflow keys
    /// included).
    pub fn limit_keys(&self) -> usize {
        read(&self.limits).map.len()
    }

    /// Adds one limit's deltas (every counter exists once the limit is hit,
    /// as the reference creates them together).
    pub fn add_limit(&self, key: &str, d: &StatDelta) {
        let add = [
            d.near_limit,
            d.over_limit,
            d.total_hits,
            d.within_limit,
            d.shadow_mode,
        ];
        let apply = |c: &LimitCounters| {
            for (c, a) in c.iter().zip(add) {
                saturating_add(c, a);
            }
        };
        // A client names the values (and, with a `limit` override, the
        // entries) of a key: one longer than any real key counts in its
        // domain's overflow, so the cap bounds bytes too, not only keys.
        let long;
        let key = if key.len() > MAX_KEY_BYTES {
            long = overflow_key(key);
            long.as_str()
        } else {
            key
        };
        if let Some(c) = read(&self.limits).map.get(key) {
            return apply(c);
        }
        let mut g = write(&self.limits);
        if let Some(c) = g.map.get(key) {
            return apply(c);
        }
        let key = if key.ends_with(OVERFLOW_KEY) && key == overflow_key(key) {
            key.to_string()
        } else if g.own < self.max_keys {
            g.own += 1;
            key.to_string()
        } else {
            overflow_key(key)
        };
        apply(g.map.entry(key).or_default());
    }

    /// Every counter with its statsd name, copied under read locks only.
    fn snapshot(&self) -> BTreeMap<String, u64> {
        let counters: Vec<(String, u64)> = read(&self.counters)
            .iter()
            .map(|(k, v)| (k.clone(), v.load(Ordering::Relaxed)))
            .collect();
        let limits: Vec<(String, [u64; 5])> = read(&self.limits)
            .map
            .iter()
            .map(|(k, c)| {
                (
                    k.clone(),
                    std::array::from_fn(|i| c[i].load(Ordering::Relaxed)),
                )
            })
            .collect();
        let mut all: BTreeMap<String, u64> = counters.into_iter().collect();
        for (key, c) in limits {
            for (stat, v) in LIMIT_STATS.iter().zip(c) {
                all.insert(format!("{RL}{key}.{stat}"), v);
            }
        }
        all
    }

    pub fn time(&self, name: &str, secs: f64) {
        {
            let mut g = lock(&self.timers);
            if !g.contains_key(name) && g.len() >= self.max_keys {
                return;
            }
            let t = g.entry(name.to_string()).or_insert_with(|| Timer {
                buckets: vec![0; BUCKETS.len()],
                sum: 0.0,
                count: 0,
            });
            for (i, b) in BUCKETS.iter().enumerate() {
                if secs <= *b {
                    t.buckets[i] = t.buckets[i].saturating_add(1);
                }
            }
            t.sum += secs;
            t.count = t.count.saturating_add(1);
        }
        if self.statsd.load(Ordering::Relaxed) {
            let mut p = lock(&self.pending_timings);
            if p.len() < MAX_PENDING_TIMINGS {
                p.push((name.to_string(), secs));
            }
        }
    }

    /// The statsd lines since the last flush: counter deltas and timings.
    pub fn statsd_lines(&self) -> Vec<String> {
        let all = self.snapshot();
        let timings = std::mem::take(&mut *lock(&self.pending_timings));
        let mut flushed = lock(&self.flushed);
        let mut lines = Vec::new();
        for (k, v) in all {
            let last = flushed.get(&k).copied().unwrap_or(0);
            if v > last {
                lines.push(format!("{k}:{}|c", v - last));
            }
            if v != last {
                flushed.insert(k, v);
            }
        }
        for (k, secs) in timings {
            lines.push(format!("{k}:{}|ms", (secs * 1000.0).round() as u64));
        }
        lines
    }

    /// The Prometheus text exposition.
    pub fn prometheus(&self) -> String {
        let all = self.snapshot();
        let timers: Vec<(String, Vec<u64>, f64, u64)> = lock(&self.timers)
            .iter()
            .map(|(k, t)| (k.clone(), t.buckets.clone(), t.sum, t.count))
            .collect();
        let mut families: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (k, v) in &all {
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
        for (k, buckets, sum, count) in &timers {
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
        let (n, l) = prom_name("ratelimit.service.rate_limit.rl.a_b.c_d.over_limit");
        assert_eq!(n, "ratelimit_service_rate_limit_over_limit");
        assert_eq!(l.len(), 3);
        assert_eq!(l[2], ("key2".into(), "c_d".into()));
        let (n, l) = prom_name("ratelimit.service.rate_limit.rl.a_b.c_d.e.over_limit");
        assert_eq!(n, "ratelimit_service_rate_limit_rl_a_b_c_d_e_over_limit");
        assert!(l.is_empty());
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

    #[test]
    fn counters_saturate() {
        let s = Stats::default();
        let hits = |n| StatDelta {
            total_hits: n,
            ..Default::default()
        };
        s.add_limit("rl.k_v", &hits(i64::MAX as u64));
        s.add_limit("rl.k_v", &hits(i64::MAX as u64));
        s.add_limit("rl.k_v", &hits(1));
        s.add_limit("rl.k_v", &hits(u64::MAX));
        assert_eq!(
            s.get("ratelimit.service.rate_limit.rl.k_v.total_hits"),
            u64::MAX
        );
        s.add("ratelimit.service.global_shadow_mode", u64::MAX);
        s.add("ratelimit.service.global_shadow_mode", 1);
        assert_eq!(s.get("ratelimit.service.global_shadow_mode"), u64::MAX);
        assert!(s
            .prometheus()
            .contains("ratelimit_service_rate_limit_total_hits{domain=\"rl\",key1=\"k_v\"} 18446744073709551615\n"));
    }

    #[test]
    fn keys_beyond_the_cap_count_in_their_domains_overflow_key() {
        let s = Stats::new(3);
        let one = StatDelta {
            total_hits: 1,
            ..Default::default()
        };
        for i in 0..10 {
            s.add_limit(&format!("rl.user_{i}"), &one);
        }
        s.add_limit("other.k", &one);
        s.add_limit("rl.user_0", &one);
        assert_eq!(s.limit_keys(), 5, "three own keys and two overflow keys");
        assert_eq!(
            s.get("ratelimit.service.rate_limit.rl.user_0.total_hits"),
            2
        );
        assert_eq!(
            s.get("ratelimit.service.rate_limit.rl._overflow.total_hits"),
            7
        );
        assert_eq!(
            s.get("ratelimit.service.rate_limit.other._overflow.total_hits"),
            1
        );
        assert_eq!(
            s.get("ratelimit.service.rate_limit.rl.user_9.total_hits"),
            0
        );
    }

    #[test]
    fn unknown_domains_are_one_series() {
        let s = Stats::new(2);
        for i in 0..100 {
            s.add(
                &format!("ratelimit.service.rate_limit.d{i}.domain_not_found"),
                1,
            );
        }
        s.add("a", 1);
        s.add("b", 1);
        s.add("c", 1);
        assert_eq!(s.get(DOMAIN_NOT_FOUND), 100);
        assert_eq!(s.get("a"), 1);
        assert_eq!(s.get("c"), 0);
        assert_eq!(s.get(COUNTER_OVERFLOW), 2, "b and c beyond two names");
        assert!(s
            .prometheus()
            .contains("ratelimit_service_rate_limit_domain_not_found 100\n"));
    }

    #[test]
    fn values_with_dots_never_share_a_series() {
        // A detailed remote_address: "1.2.3.4" and "1.2.3.5" are two
        // series, not one duplicated (Prometheus drops duplicates).
        let s = Stats::default();
        for ip in ["1.2.3.4", "1.2.3.5"] {
            s.add_limit(
                &format!("rl.remote_address_{ip}"),
                &StatDelta {
                    total_hits: 1,
                    ..Default::default()
                },
            );
        }
        let text = s.prometheus();
        let mut series: Vec<&str> = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.rsplit_once(' ').map(|(k, _)| k))
            .collect();
        let n = series.len();
        series.sort();
        series.dedup();
        assert_eq!(series.len(), n, "{text}");
    }

    #[test]
    fn a_key_longer_than_the_bound_counts_in_the_overflow() {
        let s = Stats::new(10);
        let d = StatDelta {
            total_hits: 1,
            ..Default::default()
        };
        let long = format!("rl.user_{}", "x".repeat(MAX_KEY_BYTES));
        s.add_limit(&long, &d);
        s.add_limit(&long, &d);
        s.add_limit(&format!("rl.user_{}", "x".repeat(MAX_KEY_BYTES - 8)), &d);
        assert_eq!(s.limit_keys(), 2);
        assert_eq!(
            s.get("ratelimit.service.rate_limit.rl._overflow.total_hits"),
            2
        );
        assert!(!s.prometheus().contains(&"x".repeat(MAX_KEY_BYTES)));
    }
}
