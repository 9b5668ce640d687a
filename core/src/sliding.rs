//! Exact sliding window log.
//!
//! A request of `quantity` at `now` is allowed when the quantities recorded
//! at times in `(now - window, now]`, plus `quantity`, do not exceed `limit`.
//! Only allowed requests are recorded, one entry each whatever their
//! quantity.
//!
//! The log is a byte buffer of varint-encoded entries: the time since the
//! previous entry in nanoseconds, shifted left by one, with the low bit set
//! when a quantity other than 1 follows as a second varint. Requests spread
//! over a window cost 2 to 4 bytes each; expired entries are dropped from the
//! front in amortised O(1) by advancing an offset and compacting rarely.

use crate::reply::Verdict;
use crate::ParamError;

/// A sliding window log. Invariants (checked by [`Log::decode`] for data
/// from outside): `len` entries are encoded in `bytes[head..]`, their
/// quantities add up to `total`, the first is at `first_ts` and the last at
/// `last_ts`, timestamps are non-negative and never decrease.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Log {
    bytes: Vec<u8>,
    head: usize,
    len: u64,
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

const FORMAT_VERSION: u8 = 1;

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
        (self.len > 0).then_some(self.last_ts)
    }

    /// Bytes of heap this log holds, for `MEMORY USAGE`.
    pub fn heap_bytes(&self) -> usize {
        self.bytes.capacity()
    }

    /// Appends an entry; `ts` must not be before the newest entry.
    pub fn push(&mut self, ts: i64, quantity: i64) -> Result<(), LogError> {
        if quantity < 1 || ts < 0 || (self.len > 0 && ts < self.last_ts) {
            return Err(LogError::BadEntry);
        }
        let total = self.total.checked_add(quantity).ok_or(LogError::Overflow)?;
        let delta = if self.len == 0 { 0 } else { ts - self.last_ts } as u64;
        self.reserve(2 * 10);
        put_varint(&mut self.bytes, delta << 1 | u64::from(quantity != 1));
        if quantity != 1 {
            put_varint(&mut self.bytes, quantity as u64);
        }
        if self.len == 0 {
            self.first_ts = ts;
        }
        self.len += 1;
        self.total = total;
        self.last_ts = ts;
        Ok(())
    }

    /// Grows the buffer by a quarter at a time rather than doubling, so that
    /// unused capacity stays small for large logs.
    fn reserve(&mut self, extra: usize) {
        let needed = self.bytes.len().saturating_add(extra);
        if needed > self.bytes.capacity() {
            let grow = (self.bytes.capacity() / 4).max(extra).max(32);
            self.bytes.reserve_exact(grow);
        }
    }

    /// Drops every entry at or before `cutoff` (`now - window`).
    pub fn purge(&mut self, cutoff: i64) {
        let mut dropped = false;
        while self.len > 0 && self.first_ts <= cutoff {
            self.pop_front();
            dropped = true;
        }
        if dropped {
            self.compact();
        }
    }

    fn pop_front(&mut self) {
        let Some((_, quantity, next)) = decode_entry(&self.bytes, self.head) else {
            // Unreachable for a log built by `push` or `decode`; recover by
            // emptying rather than looping.
            *self = Self::new();
            return;
        };
        self.head = next;
        self.len -= 1;
        self.total -= quantity;
        if self.len == 0 {
            self.bytes.clear();
            self.head = 0;
            self.total = 0;
        } else if let Some((delta, _, _)) = decode_entry(&self.bytes, self.head) {
            self.first_ts += delta;
        }
    }

    /// Moves the live bytes to the front once the dead prefix is a quarter
    /// of them (each byte moves O(1) times on average), and returns memory
    /// when the buffer is mostly unused.
    fn compact(&mut self) {
        let live = self.bytes.len() - self.head;
        if self.head > 64 && self.head >= live / 4 {
            self.bytes.drain(..self.head);
            self.head = 0;
        }
        if self.bytes.capacity() > 64 && self.bytes.len() < self.bytes.capacity() / 4 {
            self.bytes
                .shrink_to(self.bytes.len() + self.bytes.len() / 4);
        }
    }

    /// The entries, oldest first, as `(time, quantity)`.
    pub fn iter(&self) -> Entries<'_> {
        Entries {
            bytes: &self.bytes,
            pos: self.head,
            left: self.len,
            ts: self.first_ts,
            first: true,
        }
    }

    /// The total quantity of the entries at or before `cutoff` (those that
    /// have left a window ending `cutoff + window`), and the entries after
    /// it, walking the expired prefix once.
    pub fn split_at(&self, cutoff: i64) -> (i64, Entries<'_>) {
        let mut entries = self.iter();
        let mut expired = 0i64;
        loop {
            let rest = entries.clone();
            match entries.next() {
                Some((ts, q)) if ts <= cutoff => expired = expired.saturating_add(q),
                _ => return (expired, rest),
            }
        }
    }

    /// A self-contained serialisation (for RDB, AOF rewrite and `DUMP`):
    /// a version byte, the entry count, the total, the first and last
    /// times, then the entries, the first one with a zero delta.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.bytes.len() - self.head + 40);
        out.push(FORMAT_VERSION);
        put_varint(&mut out, self.len);
        put_varint(&mut out, self.total as u64);
        put_varint(&mut out, self.first_ts as u64);
        put_varint(&mut out, self.last_ts as u64);
        if let Some((_, quantity, next)) = decode_entry(&self.bytes, self.head) {
            put_varint(&mut out, u64::from(quantity != 1));
            if quantity != 1 {
                put_varint(&mut out, quantity as u64);
            }
            out.extend_from_slice(&self.bytes[next..]);
        }
        out
    }

    /// Parses what [`Log::encode`] wrote, verifying every invariant: any
    /// other bytes give an error, never a panic or an inconsistent log.
    pub fn decode(data: &[u8]) -> Result<Self, LogError> {
        let mut pos = 0;
        if data.first() != Some(&FORMAT_VERSION) {
            return Err(LogError::Malformed);
        }
        pos += 1;
        let mut field = || -> Result<u64, LogError> {
            let (v, next) = get_varint(data, pos).ok_or(LogError::Malformed)?;
            pos = next;
            Ok(v)
        };
        let len = field()?;
        let total = i64::try_from(field()?).map_err(|_| LogError::Malformed)?;
        let first_ts = i64::try_from(field()?).map_err(|_| LogError::Malformed)?;
        let last_ts = i64::try_from(field()?).map_err(|_| LogError::Malformed)?;
        let log = Self {
            bytes: data[pos..].to_vec(),
            head: 0,
            len,
            total,
            first_ts,
            last_ts,
        };
        log.verify()?;
        Ok(log)
    }

    fn verify(&self) -> Result<(), LogError> {
        let mut count = 0u64;
        let mut sum = 0i64;
        let mut pos = self.head;
        let mut ts = self.first_ts;
        while pos < self.bytes.len() {
            let (delta, quantity, next) =
                decode_entry(&self.bytes, pos).ok_or(LogError::Malformed)?;
            if count > 0 {
                ts = ts.checked_add(delta).ok_or(LogError::Malformed)?;
            } else if delta != 0 {
                return Err(LogError::Malformed);
            }
            sum = sum.checked_add(quantity).ok_or(LogError::Malformed)?;
            count += 1;
            pos = next;
        }
        let consistent = count == self.len
            && sum == self.total
            && (count == 0 || (ts == self.last_ts && self.first_ts >= 0))
            && (count > 0 || (self.total == 0 && self.bytes.is_empty()));
        if consistent {
            Ok(())
        } else {
            Err(LogError::Malformed)
        }
    }
}

/// Iterator over a log's entries.
#[derive(Clone)]
pub struct Entries<'a> {
    bytes: &'a [u8],
    pos: usize,
    left: u64,
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

/// Validated parameters of one sliding window limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlidingWindow {
    limit: i64,
    window: i64,
}

/// What the log decides for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Admitted: when `record_at` is set (quantity above 0), drop entries at
    /// or before `now - window` and append the request at that time.
    Allowed { record_at: Option<i64> },
    /// Refused; enough entries leave the window for it after `retry_after`.
    Limited { retry_after: i64 },
    /// Refused; the request is larger than the limit (or the limit is 0).
    NeverFits,
}

impl SlidingWindow {
    /// `limit >= 0` and `window >= 1` (nanoseconds).
    pub fn new(limit: i64, window: i64) -> Result<Self, ParamError> {
        if limit < 0 || window < 1 {
            return Err(ParamError::Overflow);
        }
        Ok(Self { limit, window })
    }

    pub fn window(&self) -> i64 {
        self.window
    }

    /// Decides a request without changing the log.
    pub fn decide(&self, log: &Log, now: i64, quantity: i64) -> (Decision, Verdict) {
        let (stale, live) = log.split_at(now.saturating_sub(self.window));
        let mut live = live.peekable();
        let in_window = log.total - stale;
        let newest_live = live.peek().map(|_| log.last_ts);

        let fits = self.limit > 0 && quantity <= self.limit;
        let decision = if !fits || quantity < 0 {
            Decision::NeverFits
        } else if i128::from(in_window) + i128::from(quantity) <= i128::from(self.limit) {
            let record_at = (quantity > 0).then(|| now.max(log.newest().unwrap_or(now)).max(0));
            Decision::Allowed { record_at }
        } else {
            // The oldest live entries must leave until the rest plus this
            // request fit: the entry that completes `need` sets the time.
            // quantity <= limit here, so this cannot overflow.
            let need = in_window - (self.limit - quantity);
            let mut freed = 0i64;
            let mut at = now;
            for (ts, q) in live {
                freed = freed.saturating_add(q);
                at = ts;
                if freed >= need {
                    break;
                }
            }
            let retry_after = at.saturating_add(self.window).saturating_sub(now).max(1);
            Decision::Limited { retry_after }
        };

        let (used, newest) = match decision {
            Decision::Allowed {
                record_at: Some(at),
            } => (in_window.saturating_add(quantity), Some(at)),
            _ => (in_window, newest_live),
        };
        let verdict = Verdict {
            limited: !matches!(decision, Decision::Allowed { .. }),
            limit: self.limit,
            remaining: self.limit.saturating_sub(used).clamp(0, self.limit),
            retry_after: match decision {
                Decision::Limited { retry_after } => Some(retry_after),
                _ => None,
            },
            reset_after: newest.map_or(0, |ts| {
                ts.saturating_add(self.window).saturating_sub(now).max(0)
            }),
        };
        (decision, verdict)
    }
}

/// Applies an allowed request: drops what left the window at `at` and
/// records the request. The same call replays the effect on replicas. On
/// error the log is unchanged.
pub fn record(log: &mut Log, window: i64, at: i64, quantity: i64) -> Result<(), LogError> {
    if quantity < 1 || at < 0 || log.newest().is_some_and(|newest| at < newest) {
        return Err(LogError::BadEntry);
    }
    let cutoff = at.saturating_sub(window);
    let (leaving, _) = log.split_at(cutoff);
    (log.total() - leaving)
        .checked_add(quantity)
        .ok_or(LogError::Overflow)?;
    log.purge(cutoff);
    log.push(at, quantity)
}

/// When the key can expire: the instant its newest entry leaves the window,
/// in milliseconds (the key outlives the entry by under 1 ms).
pub fn expire_at_ms(log: &Log, window: i64) -> Option<i64> {
    log.newest()
        .map(|ts| ts.saturating_add(window) / crate::NANOS_PER_MILLI)
}
