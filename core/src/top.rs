//! The keys refused most often, in bounded memory: the Space-Saving
//! heavy-hitter summary (Metwally, Agrawal, El Abbadi, "Efficient
//! Computation of Frequent and Top-k Elements in Data Streams", 2005) over
//! a stream-summary structure, so that every update is O(1).
//!
//! A summary tracks at most `capacity` keys. A refusal of a tracked key
//! adds one to its count. A refusal of an untracked key, when the summary
//! is full, takes over an entry with the smallest count `m`: the new key
//! starts at `m + 1` with an error bound of `m` (it may have been refused
//! up to `m` times before, uncounted). So for every reported key
//! `count - error <= true count <= count`, and every key refused more than
//! `N / capacity` times (N refusals in all) is tracked.
//!
//! Entries are kept in buckets of equal count, the buckets in a doubly
//! linked list ordered by count: an increment moves one entry from its
//! bucket to the next (creating it when needed) and the smallest count is
//! the first bucket. Entries and buckets live in vectors indexed by
//! position, never reallocated after the summary is full.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};

/// A key a summary can own, filled from a borrowed form without a new
/// allocation when an evicted key's storage can be reused.
pub trait TopKey: Eq + Hash + Borrow<Self::Ref> + Sized {
    type Ref: ?Sized + Eq + Hash;
    /// The owned form of `from`, reusing `old`'s storage if given.
    fn fill(old: Option<Self>, from: &Self::Ref) -> Self;
}

impl TopKey for Vec<u8> {
    type Ref = [u8];
    fn fill(old: Option<Self>, from: &[u8]) -> Self {
        let mut v = old.unwrap_or_default();
        v.clear();
        v.extend_from_slice(from);
        // A buffer left large by a long key is not kept for a short one:
        // a key's buffer never exceeds `2 * len + 64` bytes.
        if v.capacity() > 2 * from.len() + 64 {
            v.shrink_to(from.len());
        }
        v
    }
}

impl Top<Vec<u8>> {
    /// The heap bytes used now: the entries, and the keys' buffers.
    pub fn memory(&self) -> usize {
        let keys: usize = self
            .keys
            .iter()
            .flatten()
            .chain(self.index.keys())
            .map(Vec::capacity)
            .sum();
        self.len() * Self::bytes_per_entry() + keys
    }
}

/// The longest key a summary stores, in bytes. A longer key is tracked
/// as [`bounded_key`] names it, so that a summary's memory does not
/// depend on the keys' lengths.
pub const MAX_KEY: usize = 128;

/// Hex digits of the hash that ends a shortened key.
const HASH_DIGITS: usize = 16;
/// What stands between a shortened key's head and its hash.
const ELLIPSIS: &[u8] = b"...";

/// The key a summary tracks for `key`: `key` itself up to [`MAX_KEY`]
/// bytes; a longer key as its first 109 bytes, `...` and 16 hex digits of
/// a hash (64-bit FNV-1a) of the whole key, 128 bytes in all. Different
/// long keys with the same head stay apart (but for a hash collision), and
/// the same key is always shortened the same way.
pub fn bounded_key(key: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    if key.len() <= MAX_KEY {
        return std::borrow::Cow::Borrowed(key);
    }
    let head = MAX_KEY - ELLIPSIS.len() - HASH_DIGITS;
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        hash = (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    let mut out = Vec::with_capacity(MAX_KEY);
    out.extend_from_slice(&key[..head]);
    out.extend_from_slice(ELLIPSIS);
    out.extend_from_slice(format!("{hash:016x}").as_bytes());
    std::borrow::Cow::Owned(out)
}

impl TopKey for u64 {
    type Ref = u64;
    fn fill(_: Option<Self>, from: &u64) -> Self {
        *from
    }
}

const NONE: u32 = u32::MAX;

/// The index's hash: a multiply-rotate mix of 8 bytes at a time, seeded at
/// random per summary. Several times faster than the standard SipHash on
/// short keys; a client that made keys collide could at worst make a
/// lookup scan the index, which never holds more than `capacity` keys.
#[derive(Clone, Debug)]
pub struct Seeded(u64);

impl Default for Seeded {
    fn default() -> Self {
        Self::new()
    }
}

impl Seeded {
    pub fn new() -> Self {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(0x5eed);
        Seeded(h.finish() | 1)
    }
}

impl BuildHasher for Seeded {
    type Hasher = Mix;
    fn build_hasher(&self) -> Mix {
        Mix(self.0)
    }
}

#[derive(Clone, Debug)]
pub struct Mix(u64);

const MUL: u64 = 0x9e37_79b9_7f4a_7c15;

impl Mix {
    fn add(&mut self, word: u64) {
        self.0 = (self.0 ^ word).wrapping_mul(MUL).rotate_left(29);
    }
}

impl Hasher for Mix {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        let mut w = [0u8; 8];
        w[..rest.len()].copy_from_slice(rest);
        self.add(u64::from_le_bytes(w) ^ ((rest.len() as u64) << 56));
    }
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
    fn finish(&self) -> u64 {
        let h = self.0;
        (h ^ (h >> 32)).wrapping_mul(MUL) ^ (h >> 29)
    }
}

#[derive(Clone, Debug)]
struct Entry {
    count: u64,
    error: u64,
    /// Of `count`, how many refusals since this key was tracked were
    /// shadow-mode ones.
    shadow: u64,
    bucket: u32,
    prev: u32,
    next: u32,
}

#[derive(Clone, Debug)]
struct Bucket {
    count: u64,
    /// First entry of the bucket's list.
    head: u32,
    prev: u32,
    next: u32,
}

/// One reported key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hitter<'a, R: ?Sized> {
    pub key: &'a R,
    /// Refusals counted (an upper bound of the true number).
    pub count: u64,
    /// How much `count` may exceed the true number.
    pub error: u64,
    /// Shadow-mode refusals among those counted since the key was tracked.
    pub shadow: u64,
}

/// A Space-Saving summary of at most `capacity` keys.
#[derive(Clone, Debug)]
pub struct Top<K: TopKey> {
    capacity: usize,
    index: HashMap<K, u32, Seeded>,
    /// The key of each entry, by entry position (for eviction).
    keys: Vec<Option<K>>,
    entries: Vec<Entry>,
    buckets: Vec<Bucket>,
    free_buckets: Vec<u32>,
    /// The bucket with the smallest count.
    min: u32,
    /// The bucket with the largest count.
    max: u32,
    total: u64,
}

impl<K: TopKey> Top<K> {
    /// An empty summary of at most `capacity` keys (at most 2^31; 0 tracks
    /// nothing).
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.min(1 << 31),
            index: HashMap::with_hasher(Seeded::new()),
            keys: Vec::new(),
            entries: Vec::new(),
            buckets: Vec::new(),
            free_buckets: Vec::new(),
            min: NONE,
            max: NONE,
            total: 0,
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Keys tracked.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Refusals recorded in all (tracked or not).
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        *self = Self::new(self.capacity);
    }

    /// Records one refusal of `key` (a shadow-mode one if `shadow`).
    pub fn record(&mut self, key: &K::Ref, shadow: bool) {
        if self.capacity == 0 {
            return;
        }
        self.total = self.total.saturating_add(1);
        if let Some(&e) = self.index.get(key) {
            self.increment(e, shadow);
            return;
        }
        if self.entries.len() < self.capacity {
            let e = self.entries.len() as u32;
            self.entries.push(Entry {
                count: 1,
                error: 0,
                shadow: 0,
                bucket: NONE,
                prev: NONE,
                next: NONE,
            });
            self.keys.push(None);
            self.set_key(e, key, None);
            // A count of 1 goes first: before every other bucket.
            let b = if self.min != NONE && self.bucket(self.min).count == 1 {
                self.min
            } else {
                let b = self.new_bucket(1, NONE, self.min);
                if self.min != NONE {
                    self.bucket_mut(self.min).prev = b;
                } else {
                    self.max = b;
                }
                self.min = b;
                b
            };
            self.attach(e, b);
            if shadow {
                self.entry_mut(e).shadow = 1;
            }
            return;
        }
        // Full: the new key takes over an entry of the smallest count.
        let e = self.bucket(self.min).head;
        let old = match self.keys.get(e as usize) {
            Some(Some(k)) => self.index.remove_entry(k.borrow()).map(|(k, _)| k),
            _ => None,
        };
        self.set_key(e, key, old);
        let entry = self.entry_mut(e);
        entry.error = entry.count;
        entry.shadow = 0;
        self.increment(e, shadow);
    }

    /// The `n` keys with the largest counts, largest first.
    pub fn top(&self, n: usize) -> Vec<Hitter<'_, K::Ref>> {
        let mut out = Vec::with_capacity(n.min(self.entries.len()));
        let mut b = self.max;
        while b != NONE && out.len() < n {
            let bucket = self.bucket(b);
            let mut e = bucket.head;
            while e != NONE && out.len() < n {
                let entry = self.entry(e);
                if let Some(Some(key)) = self.keys.get(e as usize) {
                    out.push(Hitter {
                        key: key.borrow(),
                        count: entry.count,
                        error: entry.error,
                        shadow: entry.shadow,
                    });
                }
                e = entry.next;
            }
            b = bucket.prev;
        }
        out
    }

    /// The most heap bytes one tracked key of at most [`MAX_KEY`] bytes
    /// takes: [`Top::bytes_per_entry`] and its two copies (in the index and
    /// by position), each at most `2 * MAX_KEY + 64` bytes.
    pub fn worst_bytes_per_entry() -> usize {
        Self::bytes_per_entry() + 2 * (2 * MAX_KEY + 64)
    }

    /// An estimate of the heap bytes used, keys excluded: entries, buckets
    /// and the index at capacity.
    pub fn bytes_per_entry() -> usize {
        std::mem::size_of::<Entry>()
            + std::mem::size_of::<Bucket>()
            + std::mem::size_of::<Option<K>>()
            // The index: the key, the position and a control byte, at a
            // load factor of 7/8.
            + (std::mem::size_of::<K>() + std::mem::size_of::<u32>() + 1) * 8 / 7
    }

    /// Gives entry `e` the key `from`: one copy in the index, one by
    /// position for eviction, each reusing the storage of the copies it
    /// replaces (`old`: the evicted key's, taken out of the index).
    fn set_key(&mut self, e: u32, from: &K::Ref, old: Option<K>) {
        let slot = self.keys.get_mut(e as usize).and_then(Option::take);
        if let Some(slot_ref) = self.keys.get_mut(e as usize) {
            *slot_ref = Some(K::fill(slot, from));
        }
        self.index.insert(K::fill(old, from), e);
    }

    /// Adds one to entry `e`'s count, moving it to the next bucket.
    fn increment(&mut self, e: u32, shadow: bool) {
        let (b, count) = {
            let entry = self.entry_mut(e);
            entry.count = entry.count.saturating_add(1);
            if shadow {
                entry.shadow = entry.shadow.saturating_add(1);
            }
            (entry.bucket, entry.count)
        };
        let next = self.bucket(b).next;
        self.detach(e);
        let target = if next != NONE && self.bucket(next).count == count {
            next
        } else {
            // After `b`, or in its place if `b` went away with the detach.
            let (prev, after) = if self.is_live(b) {
                (b, next)
            } else {
                (self.bucket_prev_of_gap(next), next)
            };
            let nb = self.new_bucket(count, prev, after);
            if prev != NONE {
                self.bucket_mut(prev).next = nb;
            } else {
                self.min = nb;
            }
            if after != NONE {
                self.bucket_mut(after).prev = nb;
            } else {
                self.max = nb;
            }
            nb
        };
        self.attach(e, target);
    }

    /// The bucket before the place where a removed bucket was, found from
    /// the bucket after it (`NONE`: the end of the list).
    fn bucket_prev_of_gap(&self, after: u32) -> u32 {
        if after == NONE {
            self.max
        } else {
            self.bucket(after).prev
        }
    }

    fn is_live(&self, b: u32) -> bool {
        self.bucket(b).head != NONE
    }

    fn attach(&mut self, e: u32, b: u32) {
        let head = self.bucket(b).head;
        {
            let entry = self.entry_mut(e);
            entry.bucket = b;
            entry.prev = NONE;
            entry.next = head;
        }
        if head != NONE {
            self.entry_mut(head).prev = e;
        }
        self.bucket_mut(b).head = e;
    }

    /// Takes entry `e` out of its bucket; an emptied bucket leaves the list
    /// (its `head` is then `NONE`) and is kept for reuse.
    fn detach(&mut self, e: u32) {
        let (b, prev, next) = {
            let entry = self.entry(e);
            (entry.bucket, entry.prev, entry.next)
        };
        if prev != NONE {
            self.entry_mut(prev).next = next;
        } else {
            self.bucket_mut(b).head = next;
        }
        if next != NONE {
            self.entry_mut(next).prev = prev;
        }
        if self.bucket(b).head == NONE {
            let (bp, bn) = {
                let bucket = self.bucket(b);
                (bucket.prev, bucket.next)
            };
            if bp != NONE {
                self.bucket_mut(bp).next = bn;
            } else {
                self.min = bn;
            }
            if bn != NONE {
                self.bucket_mut(bn).prev = bp;
            } else {
                self.max = bp;
            }
            self.free_buckets.push(b);
        }
    }

    fn new_bucket(&mut self, count: u64, prev: u32, next: u32) -> u32 {
        let bucket = Bucket {
            count,
            head: NONE,
            prev,
            next,
        };
        match self.free_buckets.pop() {
            Some(b) => {
                *self.bucket_mut(b) = bucket;
                b
            }
            None => {
                self.buckets.push(bucket);
                (self.buckets.len() - 1) as u32
            }
        }
    }

    fn entry(&self, e: u32) -> &Entry {
        &self.entries[e as usize]
    }
    fn entry_mut(&mut self, e: u32) -> &mut Entry {
        &mut self.entries[e as usize]
    }
    fn bucket(&self, b: u32) -> &Bucket {
        &self.buckets[b as usize]
    }
    fn bucket_mut(&mut self, b: u32) -> &mut Bucket {
        &mut self.buckets[b as usize]
    }
}

#[cfg(test)]
mod bounded_tests {
    use super::*;

    #[test]
    fn long_keys_are_shortened_the_same_way_and_kept_apart() {
        assert_eq!(&*bounded_key(b"short"), b"short");
        let at_limit = vec![b'k'; MAX_KEY];
        assert_eq!(&*bounded_key(&at_limit), &at_limit[..]);
        let mut a = vec![b'a'; 32 * 1024];
        let b = a.clone();
        a[30_000] = b'b';
        let (sa, sb) = (bounded_key(&a), bounded_key(&b));
        assert_eq!(sa.len(), MAX_KEY);
        assert_eq!(sb.len(), MAX_KEY);
        assert_ne!(sa, sb);
        assert_eq!(bounded_key(&a), sa);
        assert_eq!(&sa[..109], &a[..109]);
        assert_eq!(&sa[109..112], b"...");
    }

    #[test]
    fn memory_stays_within_the_worst_case_whatever_the_keys() {
        let mut top: Top<Vec<u8>> = Top::new(64);
        let mut n = 0u64;
        for len in [1usize, 200, 10, 5000, 3, 128, 127, 64 * 1024] {
            for i in 0..200u64 {
                n += 1;
                let mut key = vec![b'x'; len];
                key.extend_from_slice(&(i * n).to_le_bytes());
                top.record(&bounded_key(&key), false);
                assert!(top.memory() <= 64 * Top::<Vec<u8>>::worst_bytes_per_entry());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// Walks the structure and checks its invariants: buckets in strictly
    /// increasing count, each entry in the bucket of its count, every entry
    /// once, the index and the keys agreeing.
    fn check<K: TopKey + Clone + std::fmt::Debug>(t: &Top<K>) {
        let mut seen = 0;
        let mut b = t.min;
        let mut last = 0;
        let mut prev = NONE;
        while b != NONE {
            let bucket = t.bucket(b);
            assert!(bucket.count > last, "buckets out of order");
            assert_eq!(bucket.prev, prev);
            assert_ne!(bucket.head, NONE, "an empty bucket in the list");
            let mut e = bucket.head;
            let mut ep = NONE;
            while e != NONE {
                let entry = t.entry(e);
                assert_eq!(entry.bucket, b);
                assert_eq!(entry.count, bucket.count);
                assert_eq!(entry.prev, ep);
                assert!(entry.error < entry.count);
                let key = t.keys[e as usize].as_ref().unwrap();
                assert_eq!(t.index.get(key.borrow()), Some(&e));
                seen += 1;
                ep = e;
                e = entry.next;
            }
            last = bucket.count;
            prev = b;
            b = bucket.next;
        }
        assert_eq!(t.max, prev);
        assert_eq!(seen, t.entries.len());
        assert_eq!(t.index.len(), t.entries.len());
        assert!(t.entries.len() <= t.capacity);
    }

    #[test]
    fn counts_exactly_below_capacity() {
        let mut t: Top<Vec<u8>> = Top::new(4);
        for (k, n) in [(&b"a"[..], 3), (b"b", 1), (b"c", 5)] {
            for i in 0..n {
                t.record(k, i == 0);
            }
        }
        check(&t);
        let top = t.top(10);
        let got: Vec<_> = top
            .iter()
            .map(|h| (h.key, h.count, h.error, h.shadow))
            .collect();
        assert_eq!(
            got,
            vec![
                (&b"c"[..], 5, 0, 1),
                (&b"a"[..], 3, 0, 1),
                (&b"b"[..], 1, 0, 1)
            ]
        );
        assert_eq!(t.top(1).len(), 1);
        assert_eq!(t.total(), 9);
    }

    #[test]
    fn a_new_key_takes_over_the_smallest_count() {
        let mut t: Top<Vec<u8>> = Top::new(2);
        t.record(b"a", false);
        t.record(b"a", false);
        t.record(b"b", false);
        t.record(b"c", true);
        check(&t);
        let top = t.top(10);
        assert_eq!(top.len(), 2);
        // c replaced b (count 1): count 2, error 1, one shadow refusal.
        assert!(top.contains(&Hitter {
            key: &b"c"[..],
            count: 2,
            error: 1,
            shadow: 1
        }));
        assert!(!t.index.contains_key(&b"b"[..]));
    }

    #[test]
    fn zero_capacity_tracks_nothing() {
        let mut t: Top<u64> = Top::new(0);
        t.record(&1, false);
        assert!(t.is_empty());
        assert!(t.top(5).is_empty());
    }

    #[test]
    fn clear_forgets() {
        let mut t: Top<u64> = Top::new(3);
        for k in 0..10 {
            t.record(&k, false);
        }
        t.clear();
        check(&t);
        assert!(t.is_empty() && t.total() == 0 && t.capacity() == 3);
        t.record(&7, false);
        assert_eq!(t.top(1)[0].count, 1);
    }

    proptest! {
        #[test]
        fn space_saving_bounds(
            capacity in 1usize..12,
            stream in proptest::collection::vec((0u64..30, any::<bool>()), 0..400),
        ) {
            let mut t: Top<u64> = Top::new(capacity);
            let mut truth: HashMap<u64, u64> = HashMap::new();
            for (k, shadow) in &stream {
                t.record(k, *shadow);
                *truth.entry(*k).or_default() += 1;
            }
            check(&t);
            let n = stream.len() as u64;
            prop_assert_eq!(t.total(), n);
            let top = t.top(usize::MAX);
            prop_assert_eq!(top.len(), truth.len().min(capacity));
            // The counts add up to the stream's length (Space-Saving's
            // invariant), in order, each within its bound.
            prop_assert_eq!(top.iter().map(|h| h.count).sum::<u64>(), n);
            for w in top.windows(2) {
                prop_assert!(w[0].count >= w[1].count);
            }
            for h in &top {
                let real = truth[h.key];
                prop_assert!(h.count >= real && h.count - h.error <= real);
                prop_assert!(h.shadow <= h.count);
            }
            // Every key refused more than n / capacity times is tracked.
            for (k, real) in &truth {
                if *real * capacity as u64 > n {
                    prop_assert!(t.index.contains_key(k), "{} ({} of {}) not tracked", k, real, n);
                }
            }
        }

        #[test]
        fn byte_keys_reuse_storage_and_stay_consistent(
            stream in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..5), 0..200),
        ) {
            let mut t: Top<Vec<u8>> = Top::new(5);
            for k in &stream {
                t.record(k, false);
            }
            check(&t);
        }
    }

    /// A splitmix64 generator: the test needs reproducible streams and the
    /// crate has no dependencies.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        fn unit(&mut self) -> f64 {
            (self.next() >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    /// Keys are scattered, not in rank order.
    fn scatter(rank: usize) -> u64 {
        rank as u64 ^ 0x9e37_79b9_7f4a_7c15
    }
    fn scatter_back(key: u64) -> usize {
        (key ^ 0x9e37_79b9_7f4a_7c15) as usize
    }

    /// The goal: on a Zipf(1.1) stream of refusals over 1M keys,
    /// a summary of the default capacity (1024) finds the true top 10
    /// (recall >= 0.95 over seeds) and each reported count is within its
    /// bound.
    #[test]
    fn zipf_top_ten() {
        const KEYS: usize = 1_000_000;
        const STREAM: usize = 1_000_000;
        let mut cdf = Vec::with_capacity(KEYS);
        let mut sum = 0.0;
        for rank in 1..=KEYS {
            sum += 1.0 / (rank as f64).powf(1.1);
            cdf.push(sum);
        }
        let seeds = 5;
        let mut found = 0;
        for seed in 0..seeds {
            let mut rng = Rng(seed);
            let mut t: Top<u64> = Top::new(1024);
            let mut truth = vec![0u64; KEYS];
            for _ in 0..STREAM {
                let x = rng.unit() * sum;
                let rank = cdf.partition_point(|&c| c < x).min(KEYS - 1);
                let key = scatter(rank);
                t.record(&key, false);
                truth[rank] += 1;
            }
            let mut ranked: Vec<(u64, usize)> =
                truth.iter().enumerate().map(|(r, &c)| (c, r)).collect();
            ranked.sort_unstable_by(|a, b| b.cmp(a));
            let reported = t.top(10);
            for h in &reported {
                let real = truth[scatter_back(*h.key)];
                assert!(h.count >= real && h.count - h.error <= real);
            }
            for (_, r) in ranked.iter().take(10) {
                let key = scatter(*r);
                if reported.iter().any(|h| *h.key == key) {
                    found += 1;
                }
            }
        }
        let recall = found as f64 / (10 * seeds) as f64;
        assert!(recall >= 0.95, "recall {recall}");
    }
}
