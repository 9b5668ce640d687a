//! The local over-limit cache (`LOCAL_CACHE_SIZE_IN_BYTES`), as the
//! reference keeps one: a fixed window's key found over its limit is
//! remembered until its window ends, and a later request on that key is
//! answered OVER_LIMIT without asking Redis.
//!
//! What is cached mirrors the reference (`src/limiter/base_limiter.go`):
//! only fixed windows, only when a request found the key over its limit,
//! and never a shadow rule (the reference caches those too but answers them
//! OK; here they keep going to Redis, whose module counts their refusals).
//! A fixed window's count never falls within its window (its key names the
//! window), so a key at its limit stays there until the window ends, which
//! is when the entry expires (the reference gives it a whole unit from the
//! moment it is set, but its key changes at the window's end all the same).
//! Rules that name a policy are not cached: an operator may raise their
//! limit at any moment. GCRA and sliding windows are not cached: their
//! capacity comes back continuously.
//!
//! Memory is bounded by the size in bytes, as freecache bounds it: each
//! entry costs its key twice (the map and the expiry order) and a fixed
//! overhead; when a new entry does not fit, expired entries go first, then
//! the entries whose windows end soonest.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use crate::config::{Algorithm, RateLimit};
use crate::plan::{window_start, Outcome, COUNTING_LIMIT};

/// Bytes an entry costs beyond its key's (the map's slot, the order's
/// node, the numbers).
pub const ENTRY_OVERHEAD: usize = 96;

#[derive(Clone, Copy, Debug)]
struct Entry {
    /// The window's end, in seconds since the epoch.
    expires: u64,
    seq: u64,
    /// The limit the count was over, and the count (a lower bound: the
    /// window's counter only grows).
    limit: u32,
    count: u64,
}

#[derive(Default)]
struct Inner {
    map: HashMap<String, Entry>,
    /// `(expires, seq)` -> key: the eviction order.
    order: BTreeMap<(u64, u64), String>,
    used: usize,
    seq: u64,
}

pub struct LocalCache {
    inner: Mutex<Inner>,
    capacity: usize,
}

fn cost(key: &str) -> usize {
    key.len().saturating_mul(2).saturating_add(ENTRY_OVERHEAD)
}

/// Whether a rule's refusals may be cached (see the module's text).
pub fn cacheable(limit: &RateLimit) -> bool {
    limit.algorithm == Algorithm::FixedWindow
        && !limit.shadow_mode
        && limit.policy.is_none()
        && limit.window_seconds() > 0
}

/// What a request's outcome lets the cache remember: the key's count when
/// the request found it over its limit and the count is at the limit or
/// past it (every later hit of the window is then over), else `None`.
/// `counting`: the reference mode's counter, which took this request's
/// hits (`after`) unless they were too many to count; an enforcing
/// limiter refuses without counting (`before`).
pub fn count_to_cache(limit: &RateLimit, o: &Outcome, hits: u64, counting: bool) -> Option<u64> {
    if !cacheable(limit) || o.negative || !o.over {
        return None;
    }
    let counted = counting && hits <= COUNTING_LIMIT as u64 && o.after <= i64::MAX as u64;
    let count = if counted { o.after } else { o.before };
    (count >= u64::from(limit.requests_per_unit)).then_some(count)
}

/// The end of the fixed window of `limit` that holds `now_secs`.
pub fn window_end(limit: &RateLimit, now_secs: u64) -> u64 {
    let w = limit.window_seconds();
    window_start(now_secs, w).saturating_add(w)
}

impl LocalCache {
    /// A cache of at most `bytes` bytes; `None` for 0 (no cache).
    pub fn new(bytes: usize) -> Option<LocalCache> {
        (bytes > 0).then(|| LocalCache {
            inner: Mutex::default(),
            capacity: bytes,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `hits` on `key` (whose limit is `limit`) are over the limit
    /// by what the cache knows: the key was found at its limit in this
    /// window, with the same limit (a `limit` override with another one
    /// asks Redis).
    pub fn is_over(&self, key: &str, limit: u32, hits: u64, now_secs: u64) -> bool {
        let mut g = self.lock();
        let Some(e) = g.map.get(key).copied() else {
            return false;
        };
        if e.expires <= now_secs {
            g.remove(key);
            return false;
        }
        e.limit == limit && e.count.saturating_add(hits) > u64::from(limit)
    }

    /// Remembers that `key` counts `count` against `limit` until
    /// `expires` (seconds since the epoch).
    pub fn insert(&self, key: &str, limit: u32, count: u64, expires: u64, now_secs: u64) {
        let c = cost(key);
        if c > self.capacity || expires <= now_secs {
            return;
        }
        let mut g = self.lock();
        g.remove(key);
        // Expired entries first, then those whose windows end soonest.
        while let Some((&(exp, _), _)) = g.order.first_key_value() {
            if exp > now_secs && g.used.saturating_add(c) <= self.capacity {
                break;
            }
            if let Some((_, k)) = g.order.pop_first() {
                if g.map.remove(&k).is_some() {
                    g.used = g.used.saturating_sub(cost(&k));
                }
            }
        }
        g.seq = g.seq.wrapping_add(1);
        let seq = g.seq;
        g.order.insert((expires, seq), key.to_string());
        g.map.insert(
            key.to_string(),
            Entry {
                expires,
                seq,
                limit,
                count,
            },
        );
        g.used = g.used.saturating_add(c);
    }

    /// Forgets `key` (its count went down: hits given back).
    pub fn remove(&self, key: &str) {
        self.lock().remove(key);
    }

    /// Entries held, and the bytes they cost.
    pub fn usage(&self) -> (usize, usize) {
        let g = self.lock();
        (g.map.len(), g.used)
    }
}

impl Inner {
    fn remove(&mut self, key: &str) {
        if let Some(e) = self.map.remove(key) {
            self.order.remove(&(e.expires, e.seq));
            self.used = self.used.saturating_sub(cost(key));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Unit;

    fn fw(rpu: u32) -> RateLimit {
        RateLimit::fixed_window("d.k".into(), rpu, Unit::Minute)
    }

    fn outcome(over: bool, before: u64, after: u64) -> Outcome {
        Outcome {
            index: 0,
            over,
            before,
            after,
            remaining: 0,
            capacity: 10,
            reset_secs: None,
            negative: false,
        }
    }

    #[test]
    fn an_entry_answers_until_its_window_ends() {
        let c = LocalCache::new(1 << 20).unwrap();
        let l = fw(10);
        let now = 1_700_000_030;
        let end = window_end(&l, now);
        assert_eq!(end, 1_700_000_040, "the minute's end");
        c.insert("k", 10, 11, end, now);
        assert!(c.is_over("k", 10, 1, now));
        assert!(c.is_over("k", 10, 0, end - 1), "11 > 10 with no hits");
        assert!(!c.is_over("k", 10, 1, end), "expired at the window's end");
        assert_eq!(c.usage(), (0, 0), "and gone");
        assert!(!c.is_over("other", 10, 1, now));
        // At the limit exactly: over for any hit, not for none.
        c.insert("k", 10, 10, end, now);
        assert!(c.is_over("k", 10, 1, now) && !c.is_over("k", 10, 0, now));
        // Another limit (an override) asks Redis.
        assert!(!c.is_over("k", 20, 1, now));
        c.remove("k");
        assert!(!c.is_over("k", 10, 1, now));
        assert!(LocalCache::new(0).is_none());
    }

    #[test]
    fn memory_stays_within_the_size() {
        let per = cost("key-00000");
        let c = LocalCache::new(per * 10).unwrap();
        let now = 1_000;
        for i in 0..100u64 {
            c.insert(&format!("key-{i:05}"), 1, 2, now + 10 + i, now);
            let (n, used) = c.usage();
            assert!(used <= per * 10 && n <= 10, "{n} entries, {used} bytes");
        }
        assert_eq!(c.usage(), (10, per * 10));
        // The entries whose windows end soonest left first.
        assert!(!c.is_over("key-00000", 1, 1, now));
        assert!(c.is_over("key-00099", 1, 1, now));
        assert!(c.is_over("key-00090", 1, 1, now));
        // Expired entries make room before live ones.
        c.insert("late", 1, 2, now + 1_000, now + 105);
        assert!(c.is_over("key-00099", 1, 1, now + 105));
        assert!(!c.is_over("key-00090", 1, 1, now + 105));
        assert_eq!(c.usage(), (5, 4 * per + cost("late")));
        // A key larger than the whole cache is not kept.
        let small = LocalCache::new(ENTRY_OVERHEAD + 4).unwrap();
        small.insert("abcdefgh", 1, 2, now + 10, now);
        assert_eq!(small.usage(), (0, 0));
        small.insert("ab", 1, 2, now + 10, now);
        assert_eq!(small.usage(), (1, ENTRY_OVERHEAD + 4));
        // Setting a key again replaces it, at no extra cost.
        small.insert("ab", 1, 3, now + 20, now);
        assert_eq!(small.usage(), (1, ENTRY_OVERHEAD + 4));
    }

    #[test]
    fn only_fixed_windows_over_their_limit_are_cached() {
        let l = fw(10);
        // Reference mode: the counter took the hits.
        assert_eq!(
            count_to_cache(&l, &outcome(true, 10, 11), 1, true),
            Some(11)
        );
        assert_eq!(count_to_cache(&l, &outcome(false, 9, 10), 1, true), None);
        // Hits too many to count: the count before them.
        assert_eq!(
            count_to_cache(&l, &outcome(true, 3, u64::MAX), u64::MAX, true),
            None
        );
        assert_eq!(
            count_to_cache(&l, &outcome(true, 12, u64::MAX), u64::MAX, true),
            Some(12)
        );
        // Enforcing (all-or-nothing): refused without counting; cached only
        // when the key is full.
        assert_eq!(
            count_to_cache(&l, &outcome(true, 10, 11), 1, false),
            Some(10)
        );
        assert_eq!(count_to_cache(&l, &outcome(true, 8, 13), 5, false), None);
        let mut shadow = fw(10);
        shadow.shadow_mode = true;
        assert_eq!(
            count_to_cache(&shadow, &outcome(true, 10, 11), 1, true),
            None
        );
        let mut policy = fw(10);
        policy.policy = Some("p".into());
        assert_eq!(
            count_to_cache(&policy, &outcome(true, 10, 11), 1, true),
            None
        );
        for a in [Algorithm::Gcra, Algorithm::SlidingWindow] {
            let mut other = fw(10);
            other.algorithm = a;
            assert_eq!(
                count_to_cache(&other, &outcome(true, 10, 11), 1, false),
                None
            );
        }
        let mut refund = outcome(true, 10, 11);
        refund.negative = true;
        assert_eq!(count_to_cache(&l, &refund, 1, true), None);
    }
}
