//! The exact log's storage: entries in fixed-size chunks, each with a
//! summary, so that no operation walks or copies the whole log.
//!
//! An entry is varint-encoded: the time since the previous entry in
//! nanoseconds, shifted left by one, with the low bit set when a quantity
//! other than 1 follows as a second varint. Requests spread over a window
//! cost 2 to 4 bytes each. Entries live in chunks of at most
//! [`CHUNK_BYTES`]; each chunk knows its first and last time, its entry
//! count and its total quantity. So:
//!
//! - expiry drops whole chunks (one free each) and decodes at most the one
//!   chunk that straddles the cut;
//! - the wait for a refused request is found by skipping whole chunks on
//!   their totals and decoding one;
//! - growth appends to the last chunk, and a full chunk is never copied.
//!
//! The serialised form (RDB, `DUMP`, AOF rewrites) is one flat stream of
//! entries, independent of the chunking.

use std::collections::VecDeque;

/// Most bytes of entries in one chunk: decoding a whole chunk (about 4,000
/// entries) takes microseconds, and a log of ten million entries has about
/// 3,000 chunks, which expiry frees in well under a millisecond. 12 KiB is
/// also one of jemalloc's small size classes (the server's allocator):
/// chunks come from its fast slab allocator, not from its large extents.
pub const CHUNK_BYTES: usize = 12 * 1024;
/// The longest encoded entry: two 10-byte varints.
const MAX_ENTRY: usize = 20;
const FORMAT_VERSION: u8 = 1;

/// A sliding window log. Invariants (checked by [`Log::decode`] for data
/// from outside): every chunk holds at least one entry, times are
/// non-negative and never decrease, and `len` and `total` are the sums of
/// the chunks' counts and quantities.
#[derive(Debug, Clone, Default)]
pub struct Log {
    chunks: VecDeque<Chunk>,
    len: u64,
    total: i64,
}

#[derive(Debug, Clone)]
struct Chunk {
    /// Entries from `head` on; the delta of the entry at `head` is relative
    /// to an entry that is gone (or 0) and is not used.
    bytes: Vec<u8>,
    head: u32,
    len: u32,
    total: i64,
    first_ts: i64,
    last_ts: i64,
}

/// Why bytes do not decode to a log, or an entry cannot be appended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogError {
    Malformed,
    /// A timestamp before the newest entry, negative, or a quantity below 1.
    BadEntry,
    Overflow,
}

/// Two logs are equal when they hold the same entries, however chunked.
impl PartialEq for Log {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.total == other.total && self.iter().eq(other.iter())
    }
}

impl Eq for Log {}

impl Log {
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of recorded entries (expired ones included until purged).
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Sum of the recorded quantities.
    pub fn total(&self) -> i64 {
        self.total
    }

    /// Time of the newest entry, if any.
    pub fn newest(&self) -> Option<i64> {
        self.chunks.back().map(|c| c.last_ts)
    }

    /// Time of the oldest entry, if any.
    pub fn oldest(&self) -> Option<i64> {
        self.chunks.front().map(|c| c.first_ts)
    }

    /// Number of chunks: the work of freeing this log.
    pub fn chunk_count(&self) -> usize {
        self.chunks.len()
    }

    /// Bytes of heap this log holds, for `MEMORY USAGE`.
    pub fn heap_bytes(&self) -> usize {
        let entries: usize = self.chunks.iter().map(|c| c.bytes.capacity()).sum();
        entries + self.chunks.capacity() * std::mem::size_of::<Chunk>()
    }

    /// Appends an entry; `ts` must not be before the newest entry.
    pub fn push(&mut self, ts: i64, quantity: i64) -> Result<(), LogError> {
        if quantity < 1 || ts < 0 || self.newest().is_some_and(|newest| ts < newest) {
            return Err(LogError::BadEntry);
        }
        let total = self.total.checked_add(quantity).ok_or(LogError::Overflow)?;
        let full_chunks = self.chunks.len();
        match self.chunks.back_mut() {
            Some(last) if last.bytes.len() + MAX_ENTRY <= CHUNK_BYTES => {
                last.reserve(MAX_ENTRY);
                put_entry(&mut last.bytes, (ts - last.last_ts) as u64, quantity);
                last.len += 1;
                last.total += quantity;
                last.last_ts = ts;
            }
            _ => {
                // Once a log fills a chunk it is a large one: give the next
                // chunks their full size at once instead of growing them.
                let capacity = if full_chunks > 0 { CHUNK_BYTES } else { 32 };
                let mut bytes = Vec::with_capacity(capacity);
                put_entry(&mut bytes, 0, quantity);
                // One chunk is all most logs need: no spare slots for them.
                if self.chunks.capacity() == self.chunks.len() {
                    self.chunks.reserve_exact(self.chunks.len().max(1));
                }
                self.chunks.push_back(Chunk {
                    bytes,
                    head: 0,
                    len: 1,
                    total: quantity,
                    first_ts: ts,
                    last_ts: ts,
                });
            }
        }
        self.len += 1;
        self.total = total;
        Ok(())
    }

    /// Drops every entry at or before `cutoff` (`now - window`): whole
    /// chunks first, then the expired entries of the chunk that straddles
    /// the cut.
    pub fn purge(&mut self, cutoff: i64) {
        while let Some(front) = self.chunks.front() {
            if front.last_ts > cutoff {
                break;
            }
            self.len -= u64::from(front.len);
            self.total -= front.total;
            self.chunks.pop_front();
        }
        if let Some(front) = self.chunks.front_mut() {
            let (count, quantity) = front.drop_until(cutoff);
            self.len -= count;
            self.total -= quantity;
        }
        self.shrink_chunks();
    }

    /// Returns the chunk list's memory when it is mostly unused (after
    /// chunks were dropped).
    fn shrink_chunks(&mut self) {
        if self.chunks.capacity() > 16 && self.chunks.len() < self.chunks.capacity() / 4 {
            self.chunks.shrink_to(self.chunks.len() * 2);
        }
    }

    /// Removes `quantity` from the newest entries, newest first (an entry
    /// holding more is reduced); returns how much was removed (less when
    /// the log holds less).
    pub fn take_newest(&mut self, quantity: i64) -> i64 {
        let mut left = quantity.max(0);
        while left > 0 {
            let Some(chunk) = self.chunks.back_mut() else {
                break;
            };
            let (count, taken) = chunk.take_newest(left);
            self.len -= count;
            self.total -= taken;
            left -= taken;
            if chunk.len == 0 {
                self.chunks.pop_back();
            }
        }
        // What the next purge would do, so that a log that drops nothing
        // need not look (see `Chunk::tidy`).
        if let Some(front) = self.chunks.front_mut() {
            front.tidy();
        }
        self.shrink_chunks();
        quantity.max(0) - left
    }

    /// The total quantity of the entries at or before `cutoff`: those that
    /// have left a window ending at `cutoff + window`.
    pub fn quantity_until(&self, cutoff: i64) -> i64 {
        let mut quantity = 0i64;
        for chunk in &self.chunks {
            if chunk.last_ts <= cutoff {
                quantity += chunk.total;
                continue;
            }
            if chunk.first_ts <= cutoff {
                quantity += chunk
                    .entries()
                    .take_while(|&(ts, _)| ts <= cutoff)
                    .map(|(_, q)| q)
                    .sum::<i64>();
            }
            break;
        }
        quantity
    }

    /// The time of the entry after `cutoff` at which the quantity of the
    /// entries after `cutoff` reaches `need`, oldest first: once it has
    /// left the window, `need` has been freed. `None` if the entries after
    /// `cutoff` hold less than `need`.
    pub fn time_freeing(&self, cutoff: i64, need: i64) -> Option<i64> {
        let mut freed = 0i64;
        for chunk in &self.chunks {
            if chunk.last_ts <= cutoff {
                continue;
            }
            if chunk.first_ts > cutoff && freed.saturating_add(chunk.total) < need {
                freed += chunk.total;
                continue;
            }
            for (ts, q) in chunk.entries().filter(|&(ts, _)| ts > cutoff) {
                freed = freed.saturating_add(q);
                if freed >= need {
                    return Some(ts);
                }
            }
        }
        None
    }

    /// The entries, oldest first, as `(time, quantity)`.
    pub fn iter(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.chunks.iter().flat_map(Chunk::entries)
    }

    /// A self-contained serialisation (for RDB, AOF rewrite and `DUMP`):
    /// a version byte, the entry count, the total, the first and last
    /// times, then the entries, the first one with a zero delta.
    pub fn encode(&self) -> Vec<u8> {
        let bytes: usize = self
            .chunks
            .iter()
            .map(|c| c.bytes.len() - c.head as usize)
            .sum();
        let mut out = Vec::with_capacity(bytes + 4 * self.chunks.len() + 40);
        out.push(FORMAT_VERSION);
        put_varint(&mut out, self.len);
        put_varint(&mut out, self.total as u64);
        put_varint(&mut out, self.oldest().unwrap_or(0) as u64);
        put_varint(&mut out, self.newest().unwrap_or(0) as u64);
        let mut previous = None;
        for chunk in &self.chunks {
            // Each chunk's first entry is re-encoded relative to the
            // previous chunk's last; the rest are copied as they are.
            if let Some((_, quantity, next)) = decode_entry(&chunk.bytes, chunk.head as usize) {
                let delta = previous.map_or(0, |p| chunk.first_ts - p) as u64;
                put_entry(&mut out, delta, quantity);
                out.extend_from_slice(&chunk.bytes[next..]);
            }
            previous = Some(chunk.last_ts);
        }
        out
    }

    /// Parses what [`Log::encode`] wrote, verifying every invariant: any
    /// other bytes give an error, never a panic or an inconsistent log.
    pub fn decode(data: &[u8]) -> Result<Self, LogError> {
        if data.first() != Some(&FORMAT_VERSION) {
            return Err(LogError::Malformed);
        }
        let mut pos = 1;
        let mut field = || -> Result<i64, LogError> {
            let (v, next) = get_varint(data, pos).ok_or(LogError::Malformed)?;
            pos = next;
            i64::try_from(v).map_err(|_| LogError::Malformed)
        };
        let len = field()?;
        let total = field()?;
        let first_ts = field()?;
        let last_ts = field()?;
        let mut log = Log::new();
        let mut ts = first_ts;
        while pos < data.len() {
            let (delta, quantity, next) = decode_entry(data, pos).ok_or(LogError::Malformed)?;
            if log.is_empty() && delta != 0 {
                return Err(LogError::Malformed);
            }
            ts = ts.checked_add(delta).ok_or(LogError::Malformed)?;
            log.push(ts, quantity).map_err(|_| LogError::Malformed)?;
            pos = next;
        }
        let consistent = i64::try_from(log.len) == Ok(len)
            && log.total == total
            && (log.is_empty() || log.newest() == Some(last_ts));
        if consistent {
            Ok(log)
        } else {
            Err(LogError::Malformed)
        }
    }
}

impl Chunk {
    /// Grows the buffer by a quarter at a time rather than doubling (unused
    /// capacity stays small), never beyond [`CHUNK_BYTES`].
    fn reserve(&mut self, extra: usize) {
        let needed = self.bytes.len() + extra;
        if needed > self.bytes.capacity() {
            let grow = (self.bytes.capacity() / 4).max(extra).max(32);
            let target = (self.bytes.capacity() + grow).min(CHUNK_BYTES);
            self.bytes
                .reserve_exact(target.max(needed) - self.bytes.len());
        }
    }

    fn entries(&self) -> Entries<'_> {
        Entries {
            bytes: &self.bytes,
            pos: self.head as usize,
            left: self.len,
            ts: self.first_ts,
            first: true,
        }
    }

    /// Takes up to `quantity` from the newest entries of this chunk; returns
    /// how many entries left entirely and the quantity taken. An emptied
    /// chunk has `len` 0 and must be dropped by the caller.
    fn take_newest(&mut self, quantity: i64) -> (u64, i64) {
        if quantity >= self.total {
            let taken = (u64::from(self.len), self.total);
            self.len = 0;
            self.total = 0;
            self.bytes.truncate(self.head as usize);
            return taken;
        }
        // The varints only decode forwards: walk from the oldest entry,
        // keeping `total - quantity`; the entry that crosses it is reduced
        // and everything after it goes.
        let keep = self.total - quantity;
        let (mut kept, mut count) = (0i64, 0u32);
        let mut pos = self.head as usize;
        let mut ts = self.first_ts;
        while let Some((delta, q, next)) = decode_entry(&self.bytes, pos) {
            if count > 0 {
                ts += delta;
            }
            count += 1;
            if kept + q >= keep {
                self.bytes.truncate(pos);
                put_entry(&mut self.bytes, delta as u64, keep - kept);
                break;
            }
            kept += q;
            pos = next;
        }
        let gone = self.len - count;
        self.len = count;
        self.total = keep;
        self.last_ts = ts;
        (u64::from(gone), quantity)
    }

    /// Drops the entries at or before `cutoff` from the front of a chunk
    /// that keeps at least one; returns how many and their quantity.
    fn drop_until(&mut self, cutoff: i64) -> (u64, i64) {
        let (mut count, mut quantity) = (0u64, 0i64);
        while self.first_ts <= cutoff && self.len > 1 {
            let Some((_, q, next)) = decode_entry(&self.bytes, self.head as usize) else {
                break;
            };
            let Some((delta, _, _)) = decode_entry(&self.bytes, next) else {
                break;
            };
            // A chunk holds at most CHUNK_BYTES, so offsets fit in 32 bits.
            self.head = next as u32;
            self.first_ts += delta;
            self.len -= 1;
            self.total -= q;
            count += 1;
            quantity += q;
        }
        self.tidy();
        (count, quantity)
    }

    /// Moves the live bytes to the front once the dead prefix is a quarter
    /// of them (each byte moves O(1) times on average), and returns memory
    /// when the buffer is mostly unused. After a purge or a take, neither
    /// holds, and appending alone never makes either hold: a log that
    /// drops nothing need not look.
    fn tidy(&mut self) {
        let head = self.head as usize;
        let live = self.bytes.len() - head;
        if head > 64 && head >= live / 4 {
            self.bytes.drain(..head);
            self.head = 0;
        }
        if self.bytes.capacity() > 64 && self.bytes.len() < self.bytes.capacity() / 4 {
            self.bytes
                .shrink_to(self.bytes.len() + self.bytes.len() / 4);
        }
    }
}

/// Iterator over a chunk's entries.
struct Entries<'a> {
    bytes: &'a [u8],
    pos: usize,
    left: u32,
    ts: i64,
    first: bool,
}

impl Iterator for Entries<'_> {
    type Item = (i64, i64);

    fn next(&mut self) -> Option<(i64, i64)> {
        if self.left == 0 {
            return None;
        }
        let (delta, quantity, next) = decode_entry(self.bytes, self.pos)?;
        if !self.first {
            self.ts = self.ts.saturating_add(delta);
        }
        self.first = false;
        self.pos = next;
        self.left -= 1;
        Some((self.ts, quantity))
    }
}

fn put_entry(out: &mut Vec<u8>, delta: u64, quantity: i64) {
    put_varint(out, delta << 1 | u64::from(quantity != 1));
    if quantity != 1 {
        put_varint(out, quantity as u64);
    }
}

/// `(delta, quantity, next position)` of the entry at `pos`.
fn decode_entry(bytes: &[u8], pos: usize) -> Option<(i64, i64, usize)> {
    let (tag, mut next) = get_varint(bytes, pos)?;
    let delta = i64::try_from(tag >> 1).ok()?;
    let quantity = if tag & 1 == 1 {
        let (q, after) = get_varint(bytes, next)?;
        next = after;
        i64::try_from(q).ok().filter(|&q| q > 1)?
    } else {
        1
    };
    Some((delta, quantity, next))
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(bytes: &[u8], mut pos: usize) -> Option<(u64, usize)> {
    let mut v: u64 = 0;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(pos)?;
        pos += 1;
        let bits = u64::from(b & 0x7f);
        if shift == 63 && bits > 1 {
            return None;
        }
        v |= bits << shift;
        if b & 0x80 == 0 {
            return Some((v, pos));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log of many chunks behaves as one flat sequence: purges drop whole
    /// chunks, the encoding is the flat stream, and the summaries answer
    /// as a full walk would.
    #[test]
    fn chunks_are_invisible() {
        let mut log = Log::new();
        let n = 20_000i64;
        for i in 0..n {
            log.push(i * 1_000, 1 + i % 3).unwrap();
        }
        assert!(log.chunk_count() > 3, "{} chunks", log.chunk_count());
        let flat: Vec<(i64, i64)> = log.iter().collect();
        assert_eq!(flat.len() as u64, log.len());
        let back = Log::decode(&log.encode()).unwrap();
        assert_eq!(back, log);
        assert_eq!(back.encode(), log.encode());
        for cutoff in [-1, 0, 4_999_999, 10_000_000, n * 1_000] {
            let walk: i64 = flat.iter().filter(|e| e.0 <= cutoff).map(|e| e.1).sum();
            assert_eq!(log.quantity_until(cutoff), walk, "cutoff {cutoff}");
            for need in [1, 7, 1_000, 39_999] {
                let mut freed = 0;
                let expected = flat.iter().filter(|e| e.0 > cutoff).find_map(|&(ts, q)| {
                    freed += q;
                    (freed >= need).then_some(ts)
                });
                assert_eq!(log.time_freeing(cutoff, need), expected);
            }
        }
        let mut purged = log.clone();
        purged.purge(12_345_678);
        let rest: Vec<(i64, i64)> = flat.into_iter().filter(|e| e.0 > 12_345_678).collect();
        assert_eq!(purged.iter().collect::<Vec<_>>(), rest);
        assert_eq!(purged.total(), rest.iter().map(|e| e.1).sum::<i64>());
        purged.purge(i64::MAX);
        assert!(purged.is_empty() && purged.chunk_count() == 0);
    }

    /// Taking from the newest entries across chunks equals removing them
    /// from the flat list, the last one reduced.
    #[test]
    fn take_newest_across_chunks() {
        let mut log = Log::new();
        for i in 0..12_000i64 {
            log.push(i * 10, 1 + i % 4).unwrap();
        }
        let mut flat: Vec<(i64, i64)> = log.iter().collect();
        for take in [1, 2, 7, 20_000, 0, 5] {
            assert_eq!(log.take_newest(take), take);
            let mut left = take;
            while left > 0 {
                let last = flat.last_mut().unwrap();
                if last.1 <= left {
                    left -= last.1;
                    flat.pop();
                } else {
                    last.1 -= left;
                    left = 0;
                }
            }
            assert_eq!(log.iter().collect::<Vec<_>>(), flat);
            assert_eq!(log.total(), flat.iter().map(|e| e.1).sum::<i64>());
            assert_eq!(log.len(), flat.len() as u64);
            assert_eq!(log.newest(), flat.last().map(|e| e.0));
            assert_eq!(Log::decode(&log.encode()).unwrap(), log);
        }
        let total = log.total();
        assert_eq!(log.take_newest(total + 10), total);
        assert!(log.is_empty() && log.chunk_count() == 0);
    }
}
