//! Stats with the reference's statsd names, exported to Prometheus with the
//! names and labels of its `default_mapper.yaml` (or of a mapping file,
//! [`mapper`]), or flushed to statsd or DogStatsD.
//!
//! Every counter is an atomic that saturates at 2^64-1. A request only
//! takes a read lock to find its counters (a write lock the first time a key
//! is seen); a scrape or a flush copies the values under a read lock and
//! formats them after releasing it, so it never holds up a request. The
//! number of keys is bounded: past `max_keys` limit keys, a new key's hits
//! count in its domain's `_overflow` key, and every unknown domain counts in
//! one `domain_not_found` series.
//!
//! `EXTRA_TAGS` are carried as the reference's stats library (gostats)
//! carries them: in the name, `<name>.__<k>=<v>` per tag sorted by key.
//! statsd receives that name; DogStatsD receives the tags as `|#k:v`; the
//! Prometheus mapping sees the tagged name, as the reference's sink does.

pub mod mapper;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use crate::decide::StatDelta;
use crate::settings::Settings;
use mapper::{Kind, Mapped, Mapper};

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
type LimitCounters = Arc<[AtomicU64; 6]>;

/// A timer's histogram, in the unit and buckets of its mapping; recorded
/// through a shared reference (atomics), so that requests on different
/// threads never wait on each other for it.
struct Timer {
    mapped: Mapped,
    buckets: Vec<AtomicU64>,
    /// The sum's `f64` bits.
    sum: AtomicU64,
    count: AtomicU64,
}

impl Timer {
    fn new(mapped: Mapped) -> Timer {
        Timer {
            buckets: mapped.buckets.iter().map(|_| AtomicU64::new(0)).collect(),
            mapped,
            sum: AtomicU64::new(0f64.to_bits()),
            count: AtomicU64::new(0),
        }
    }

    /// One timing of `ms` milliseconds, scaled by the mapping.
    fn record(&self, ms: f64) {
        let v = ms * self.mapped.scale;
        for (b, n) in self.mapped.buckets.iter().zip(&self.buckets) {
            if v <= *b {
                saturating_add(n, 1);
            }
        }
        let _ = self
            .sum
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |s| {
                Some((f64::from_bits(s) + v).to_bits())
            });
        saturating_add(&self.count, 1);
    }

    fn sum(&self) -> f64 {
        f64::from_bits(self.sum.load(Ordering::Relaxed))
    }

    fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }
}

#[derive(Default)]
struct Limits {
    map: HashMap<String, LimitCounters>,
    /// Keys with their own counters (not overflow keys).
    own: usize,
}

/// How the stats are named and sent (from the settings).
#[derive(Debug, Default)]
pub struct Options {
    pub max_keys: usize,
    /// `EXTRA_TAGS`, sorted by key.
    pub tags: BTreeMap<String, String>,
    /// `USE_DOG_STATSD`: the tags as DogStatsD tags instead of in the name.
    pub dog_statsd: bool,
    /// `PROMETHEUS_MAPPER_YAML`, parsed (`None`: the built-in mapping).
    pub mapper: Option<Mapper>,
    /// `PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS` (built-in mapping only).
    pub response_time_ms: bool,
}

impl Options {
    /// The options of `settings`; a mapping file that cannot be read or
    /// parsed is an error (the service refuses to start).
    pub fn from_settings(s: &Settings) -> Result<Options, mapper::MapperError> {
        let mapper = if s.use_prometheus && !s.prometheus_mapper_yaml.is_empty() {
            Some(Mapper::from_file(&s.prometheus_mapper_yaml)?)
        } else {
            None
        };
        Ok(Options {
            max_keys: s.stats_max_keys,
            tags: s.extra_tags.clone(),
            dog_statsd: s.use_dog_statsd,
            mapper,
            response_time_ms: s.prometheus_response_time_as_milliseconds,
        })
    }
}

pub struct Stats {
    /// By the service's own names (a client's domain counts in one series):
    /// Fx hashing, several times cheaper than SipHash on these names.
    counters: RwLock<HashMap<String, Counter, rustc_hash::FxBuildHasher>>,
    /// Per limit key, the six counters of `LIMIT_STATS` (kept apart so a
    /// request allocates no names).
    limits: RwLock<Limits>,
    /// What the last statsd flush reported; only the flush touches it.
    flushed: Mutex<HashMap<String, u64>>,
    /// statsd timer name -> histogram (a handful of names).
    timers: RwLock<BTreeMap<String, Timer>>,
    /// Timings in milliseconds since the last statsd flush.
    pending_timings: Mutex<Vec<(String, f64)>>,
    max_keys: usize,
    /// gostats' name suffix of the tags (`.__k=v...`), empty without tags.
    tag_suffix: String,
    /// The DogStatsD tags (`|#k:v,...`), empty without tags.
    dog_tags: String,
    dog_statsd: bool,
    mapper: Option<Mapper>,
    response_time_ms: bool,
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

/// gostats' tag value: `.`, `:` and `|` would break a statsd line or the
/// name's tag suffix, and become `_`.
fn tag_value(v: &str) -> String {
    v.replace(['.', ':', '|'], "_")
}

impl Stats {
    /// Stats that keep their own series for at most `max_keys` limit keys
    /// (and as many named counters), with the built-in mapping and no tags.
    pub fn new(max_keys: usize) -> Stats {
        Stats::with_options(Options {
            max_keys,
            ..Options::default()
        })
    }

    pub fn with_options(o: Options) -> Stats {
        // As gostats: a tag with an empty key or value is left out.
        let tags: Vec<(&String, String)> = o
            .tags
            .iter()
            .filter(|(k, v)| !k.is_empty() && !v.is_empty())
            .map(|(k, v)| (k, tag_value(v)))
            .collect();
        let tag_suffix: String = tags.iter().map(|(k, v)| format!(".__{k}={v}")).collect();
        let dog_tags = tags
            .iter()
            .map(|(k, v)| format!("{k}:{v}"))
            .collect::<Vec<_>>()
            .join(",");
        Stats {
            counters: RwLock::default(),
            limits: RwLock::default(),
            flushed: Mutex::default(),
            timers: RwLock::default(),
            pending_timings: Mutex::default(),
            max_keys: o.max_keys.max(1),
            tag_suffix,
            dog_tags,
            dog_statsd: o.dog_statsd,
            mapper: o.mapper,
            response_time_ms: o.response_time_ms,
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

    /// A counter's value by its statsd name (without the tags).
    pub fn get(&self, name: &str) -> u64 {
        self.snapshot().get(name).copied().unwrap_or(0)
    }

    /// The number of limit keys with their own counters (overflow keys
    /// included).
    pub fn limit_keys(&self) -> usize {
        read(&self.limits).map.len()
    }

    /// Adds one limit's deltas (every counter the reference creates with
    /// the limit exists once the limit is hit).
    pub fn add_limit(&self, key: &str, d: &StatDelta) {
        let add = [
            d.near_limit,
            d.over_limit,
            d.total_hits,
            d.within_limit,
            d.shadow_mode,
            d.over_limit_with_local_cache,
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

    /// Every counter with its statsd name (without the tags), copied under
    /// read locks only.
    fn snapshot(&self) -> BTreeMap<String, u64> {
        let counters: Vec<(String, u64)> = read(&self.counters)
            .iter()
            .map(|(k, v)| (k.clone(), v.load(Ordering::Relaxed)))
            .collect();
        let limits: Vec<(String, [u64; 6])> = read(&self.limits)
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
            for (i, (stat, v)) in LIMIT_STATS.iter().zip(c).enumerate() {
                // The local cache's counter shows once it counted, as the
                // reference's (gostats flushes no counter that stayed 0),
                // so a service without the cache has no such series.
                if i == LOCAL_CACHE_STAT && v == 0 {
                    continue;
                }
                all.insert(format!("{RL}{key}.{stat}"), v);
            }
        }
        all
    }

    /// Records one timing of `name` (the reference's timers are in
    /// milliseconds; its mapping scales them).
    pub fn time(&self, name: &str, secs: f64) {
        let ms = secs * 1000.0;
        let seen = match read(&self.timers).get(name) {
            Some(t) => {
                t.record(ms);
                true
            }
            None => false,
        };
        if !seen {
            let mut g = write(&self.timers);
            if let Some(t) = g.get(name) {
                t.record(ms);
            } else {
                // The name is copied only the first time it is seen.
                if g.len() >= self.max_keys {
                    return;
                }
                let t = Timer::new(self.map_timer(name));
                t.record(ms);
                g.insert(name.to_string(), t);
            }
        }
        if self.statsd.load(Ordering::Relaxed) {
            let mut p = lock(&self.pending_timings);
            if p.len() < MAX_PENDING_TIMINGS {
                p.push((name.to_string(), ms));
            }
        }
    }

    /// A timer's Prometheus name, labels, unit and buckets (an unmapped
    /// name, or one a rule drops, is a histogram of its escaped name).
    fn map_timer(&self, name: &str) -> Mapped {
        let tagged = format!("{name}{}", self.tag_suffix);
        match &self.mapper {
            Some(m) => m.map(&tagged, Kind::Observer).unwrap_or_else(|| Mapped {
                name: String::new(),
                labels: Vec::new(),
                scale: 1.0,
                buckets: Vec::new(),
            }),
            None => mapper::prom_timer(&tagged, self.response_time_ms),
        }
    }

    /// A counter's Prometheus name and labels (`None`: dropped).
    fn map_counter(&self, name: &str) -> Option<(String, Vec<(String, String)>)> {
        let tagged = format!("{name}{}", self.tag_suffix);
        match &self.mapper {
            Some(m) => m.map(&tagged, Kind::Counter).map(|m| (m.name, m.labels)),
            None => Some(mapper::prom_name(&tagged)),
        }
    }

    /// The statsd (or DogStatsD) lines since the last flush: counter deltas
    /// and timings.
    pub fn statsd_lines(&self) -> Vec<String> {
        let all = self.snapshot();
        let timings = std::mem::take(&mut *lock(&self.pending_timings));
        let mut flushed = lock(&self.flushed);
        let (suffix, dog) = if self.dog_statsd {
            let dog = if self.dog_tags.is_empty() {
                String::new()
            } else {
                format!("|#{}", self.dog_tags)
            };
            ("", dog)
        } else {
            (self.tag_suffix.as_str(), String::new())
        };
        let mut lines = Vec::new();
        for (k, v) in all {
            let last = flushed.get(&k).copied().unwrap_or(0);
            if v > last {
                lines.push(format!("{k}{suffix}:{}|c{dog}", v - last));
            }
            if v != last {
                flushed.insert(k, v);
            }
        }
        for (k, ms) in timings {
            lines.push(format!("{k}{suffix}:{}|ms{dog}", ms.round() as u64));
        }
        lines
    }

    /// The Prometheus text exposition. Stats a mapping gives one name and
    /// labels are one series (their values summed), as statsd_exporter
    /// adds their events into one.
    pub fn prometheus(&self) -> String {
        let all = self.snapshot();
        type Hist = (Vec<f64>, Vec<u64>, f64, u64);
        let mut histograms: BTreeMap<String, BTreeMap<Vec<(String, String)>, Hist>> =
            BTreeMap::new();
        for t in read(&self.timers).values() {
            if t.mapped.name.is_empty() {
                continue;
            }
            let series = histograms
                .entry(t.mapped.name.clone())
                .or_default()
                .entry(t.mapped.labels.clone())
                .or_insert_with(|| (t.mapped.buckets.clone(), vec![0; t.buckets.len()], 0.0, 0));
            // Two timers in one series: summed when their buckets agree,
            // the first kept otherwise.
            if series.0 == t.mapped.buckets {
                for (a, b) in series.1.iter_mut().zip(&t.buckets) {
                    *a = a.saturating_add(b.load(Ordering::Relaxed));
                }
                series.2 += t.sum();
                series.3 = series.3.saturating_add(t.count());
            }
        }
        let mut families: BTreeMap<String, BTreeMap<Vec<(String, String)>, u64>> = BTreeMap::new();
        for (k, v) in &all {
            let Some((name, labels)) = self.map_counter(k) else {
                continue;
            };
            // A name a histogram has: the histogram's (statsd_exporter
            // refuses the conflicting event).
            if histograms.contains_key(&name) {
                continue;
            }
            let v0 = families.entry(name).or_default().entry(labels).or_default();
            *v0 = v0.saturating_add(*v);
        }
        let mut out = String::new();
        for (name, series) in families {
            out.push_str(&format!("# TYPE {name} counter\n"));
            for (labels, v) in series {
                out.push_str(&format!("{name}{} {v}\n", render_labels(&labels)));
            }
        }
        for (name, series) in histograms {
            out.push_str(&format!("# TYPE {name} histogram\n"));
            for (labels, (bounds, buckets, sum, count)) in series {
                for (b, n) in bounds.iter().zip(&buckets) {
                    let mut l = labels.clone();
                    l.push(("le".into(), format!("{b}")));
                    out.push_str(&format!("{name}_bucket{} {n}\n", render_labels(&l)));
                }
                let mut l = labels.clone();
                l.push(("le".into(), "+Inf".into()));
                out.push_str(&format!("{name}_bucket{} {count}\n", render_labels(&l)));
                out.push_str(&format!("{name}_sum{} {sum}\n", render_labels(&labels)));
                out.push_str(&format!("{name}_count{} {count}\n", render_labels(&labels)));
            }
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

/// A limit key's counters, in the order of [`StatDelta`]'s fields.
const LIMIT_STATS: &[&str] = &[
    "near_limit",
    "over_limit",
    "total_hits",
    "within_limit",
    "shadow_mode",
    "over_limit_with_local_cache",
];

/// The index of `over_limit_with_local_cache` in [`LIMIT_STATS`].
const LOCAL_CACHE_STAT: usize = 5;

#[cfg(test)]
mod tests;
