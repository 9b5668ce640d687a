//! Concurrency leases: at most `limit` held at once on a key, each expiring
//! unless renewed, so that a client that crashes cannot leak its slot.
//!
//! Decisions ignore leases that have expired; writes (taking, renewing or
//! releasing one) also drop them, at an explicit instant, so that replicas
//! replaying a write end up with the same leases.

use crate::reply::Verdict;
use crate::ParamError;
use std::collections::HashSet;

/// The leases of one key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Leases {
    held: Vec<Lease>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub id: Vec<u8>,
    /// Nanoseconds since the epoch; the lease is gone from this instant on.
    pub expires_at: i64,
}

/// The longest lease id accepted, in bytes.
pub const MAX_ID: usize = 1024;

/// What acquiring decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acquire {
    /// Take a new lease (or renew the caller's), expiring at `expires_at`.
    Hold { expires_at: i64, renewed: bool },
    /// All `limit` slots are held.
    Refused,
}

const FORMAT_VERSION: u8 = 1;

impl Leases {
    pub fn new() -> Self {
        Self::default()
    }

    /// Leases stored, expired ones included until a write drops them.
    pub fn len(&self) -> usize {
        self.held.len()
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// The leases, as stored.
    pub fn iter(&self) -> impl Iterator<Item = &Lease> {
        self.held.iter()
    }

    fn live(&self, now: i64) -> impl Iterator<Item = &Lease> {
        self.held.iter().filter(move |l| l.expires_at > now)
    }

    /// Whether `id` holds a lease at `now`.
    pub fn holds(&self, id: &[u8], now: i64) -> bool {
        self.live(now).any(|l| l.id == id)
    }

    /// When the last lease expires: when the key can go.
    pub fn last_expiry(&self) -> Option<i64> {
        self.held.iter().map(|l| l.expires_at).max()
    }

    /// What acquiring a lease of `lease` ns for `id` at `now` decides, and
    /// the reply: `[0, limit, remaining, -1, reset_after]` when it is taken
    /// (or renewed, for an `id` that holds one), otherwise
    /// `[1, limit, 0, retry_after, reset_after]` with the time until the
    /// first lease expires and until the last one does.
    pub fn acquire(
        &self,
        limit: i64,
        now: i64,
        lease: i64,
        id: Option<&[u8]>,
    ) -> Result<(Acquire, Verdict), ParamError> {
        let expires_at = now.checked_add(lease).ok_or(ParamError::Overflow)?;
        let renewed = id.is_some_and(|id| self.holds(id, now));
        let held = self.live(now).count() as i64;
        if renewed || held < limit {
            let after = if renewed { held } else { held + 1 };
            // A renewed lease's old expiry is replaced, not kept: renewing
            // to a shorter lease shortens the reset.
            let last = self
                .live(now)
                .filter(|l| id != Some(l.id.as_slice()))
                .map(|l| l.expires_at)
                .fold(expires_at, i64::max);
            let verdict = Verdict {
                limited: false,
                limit,
                remaining: (limit - after).max(0),
                retry_after: None,
                reset_after: last - now,
            };
            return Ok((
                Acquire::Hold {
                    expires_at,
                    renewed,
                },
                verdict,
            ));
        }
        Ok((Acquire::Refused, self.decision(limit, now, 1)))
    }

    /// What a peek answers: the decision a request of quantity 0 would get,
    /// as every peek answers. It is limited only when more than `limit`
    /// leases are held (the limit was lowered) or `limit` is 0, which
    /// refuses everything; `retry_after` is then the time until enough
    /// leases have expired, and `reset_after` the time until the last one
    /// does.
    pub fn verdict(&self, limit: i64, now: i64) -> Verdict {
        self.decision(limit, now, 0)
    }

    /// The verdict for a request of `quantity` (0 for a peek, 1 for a new
    /// lease): limited when `held + quantity > limit` or `limit` is 0,
    /// waiting until the `held + quantity - limit` earliest leases have
    /// expired (never, with `limit` 0).
    fn decision(&self, limit: i64, now: i64, quantity: i64) -> Verdict {
        let mut expiries: Vec<i64> = self.live(now).map(|l| l.expires_at).collect();
        let held = expiries.len() as i64;
        let excess = held.saturating_add(quantity).saturating_sub(limit);
        let limited = limit <= 0 || excess > 0;
        let retry_after = if limit > 0 && excess > 0 {
            usize::try_from(excess - 1)
                .ok()
                .filter(|&k| k < expiries.len())
                .map(|k| *expiries.select_nth_unstable(k).1 - now)
        } else {
            None
        };
        Verdict {
            limited,
            limit,
            remaining: (limit - held).max(0),
            retry_after,
            reset_after: expiries.iter().max().map_or(0, |t| t - now),
        }
    }

    /// Holds `id` until `expires_at` (taking a lease, or renewing the one it
    /// holds) after dropping the leases expired at `now`; returns whether
    /// `id` held one.
    pub fn hold(&mut self, id: &[u8], expires_at: i64, now: i64) -> bool {
        self.drop_expired(now);
        match self.held.iter_mut().find(|l| l.id == id) {
            Some(lease) => {
                lease.expires_at = expires_at;
                true
            }
            None => {
                if self.held.capacity() == self.held.len() {
                    self.held.reserve_exact(self.held.len().max(1));
                }
                self.held.push(Lease {
                    id: id.to_vec(),
                    expires_at,
                });
                false
            }
        }
    }

    /// Releases `id`'s lease after dropping the leases expired at `now`;
    /// returns whether it held one.
    pub fn release(&mut self, id: &[u8], now: i64) -> bool {
        self.drop_expired(now);
        let before = self.held.len();
        self.held.retain(|l| l.id != id);
        self.held.len() < before
    }

    fn drop_expired(&mut self, now: i64) {
        self.held.retain(|l| l.expires_at > now);
        if self.held.capacity() > 8 && self.held.len() < self.held.capacity() / 4 {
            self.held.shrink_to(self.held.len() * 2);
        }
    }

    /// Heap bytes held, for `MEMORY USAGE`.
    pub fn heap_bytes(&self) -> usize {
        self.held.capacity() * std::mem::size_of::<Lease>()
            + self.held.iter().map(|l| l.id.capacity()).sum::<usize>()
    }

    /// A self-contained serialisation: a version byte, the count, then each
    /// lease's id (length and bytes) and expiry.
    pub fn encode(&self) -> Vec<u8> {
        let ids: usize = self.held.iter().map(|l| l.id.len()).sum();
        let mut out = Vec::with_capacity(ids + 12 * self.held.len() + 10);
        out.push(FORMAT_VERSION);
        put_varint(&mut out, self.held.len() as u64);
        for lease in &self.held {
            put_varint(&mut out, lease.id.len() as u64);
            out.extend_from_slice(&lease.id);
            put_varint(&mut out, lease.expires_at as u64);
        }
        out
    }

    /// Parses what [`Leases::encode`] wrote: anything else (a bad version,
    /// a negative expiry, an id too long, two leases with one id, trailing
    /// bytes) is `None`, never a panic.
    pub fn decode(data: &[u8]) -> Option<Self> {
        if data.first() != Some(&FORMAT_VERSION) {
            return None;
        }
        let mut pos = 1;
        let count = get_varint(data, &mut pos)?;
        // Each lease takes at least two bytes (an id length and an expiry):
        // a count beyond that is a lie, and must not size any allocation.
        let count = usize::try_from(count)
            .ok()
            .filter(|&n| n <= data.len().saturating_sub(pos) / 2)?;
        let mut held: Vec<Lease> = Vec::with_capacity(count);
        // Ids seen so far, as slices of `data`: a set, so that finding a
        // repeated id stays linear in the leases (a payload may hold
        // hundreds of thousands; comparing each with every earlier one
        // blocked the server for seconds).
        let mut seen: HashSet<&[u8]> = HashSet::with_capacity(count);
        for _ in 0..count {
            let len = usize::try_from(get_varint(data, &mut pos)?).ok()?;
            if len > MAX_ID {
                return None;
            }
            let id = data.get(pos..pos.checked_add(len)?)?;
            pos += len;
            let expires_at = i64::try_from(get_varint(data, &mut pos)?).ok()?;
            if !seen.insert(id) {
                return None;
            }
            held.push(Lease {
                id: id.to_vec(),
                expires_at,
            });
        }
        (pos == data.len()).then_some(Self { held })
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(bytes: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v: u64 = 0;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*pos)?;
        *pos += 1;
        let bits = u64::from(b & 0x7f);
        if shift == 63 && bits > 1 {
            return None;
        }
        v |= bits << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NANOS_PER_SEC;
    use proptest::prelude::*;

    const S: i64 = NANOS_PER_SEC;
    const T0: i64 = 1_700_000_000 * S;

    /// Acquires as the module does: decide, then hold.
    fn acquire(l: &mut Leases, limit: i64, now: i64, id: &[u8]) -> [i64; 5] {
        let (a, v) = l.acquire(limit, now, 10 * S, Some(id)).unwrap();
        if let Acquire::Hold { expires_at, .. } = a {
            l.hold(id, expires_at, now);
        }
        v.to_reply()
    }

    #[test]
    fn at_most_limit_held_until_they_expire() {
        let mut l = Leases::new();
        assert_eq!(acquire(&mut l, 2, T0, b"a"), [0, 2, 1, -1, 10]);
        assert_eq!(acquire(&mut l, 2, T0 + 3 * S, b"b"), [0, 2, 0, -1, 10]);
        assert_eq!(acquire(&mut l, 2, T0 + 4 * S, b"c"), [1, 2, 0, 6, 9]);
        // Acquiring again with a held id renews it, whatever the count.
        assert_eq!(acquire(&mut l, 2, T0 + 4 * S, b"a"), [0, 2, 0, -1, 10]);
        assert!(l.release(b"b", T0 + 5 * S));
        assert!(!l.release(b"b", T0 + 5 * S));
        assert_eq!(acquire(&mut l, 2, T0 + 5 * S, b"c"), [0, 2, 0, -1, 10]);
        // At the instant a lease expires its slot is free again.
        assert_eq!(acquire(&mut l, 2, T0 + 14 * S - 1, b"d")[0], 1);
        assert_eq!(acquire(&mut l, 2, T0 + 14 * S, b"d"), [0, 2, 0, -1, 10]);
        // A peek at exactly `limit` leases is not limited (quantity 0 fits).
        assert_eq!(l.verdict(2, T0 + 14 * S).to_reply(), [0, 2, 0, -1, 10]);
        assert_eq!(Leases::new().verdict(0, T0).to_reply(), [1, 0, 0, -1, 0]);
    }

    #[test]
    fn a_peek_is_the_decision_of_quantity_zero() {
        let mut l = Leases::new();
        for (i, id) in [b"a", b"b", b"c"].into_iter().enumerate() {
            acquire(&mut l, 3, T0 + i as i64 * S, id);
        }
        // Held 3 (expiring at 10, 11, 12 s): full, but a peek fits.
        assert_eq!(l.verdict(3, T0 + 2 * S).to_reply(), [0, 3, 0, -1, 10]);
        assert_eq!(acquire(&mut l, 3, T0 + 2 * S, b"d"), [1, 3, 0, 8, 10]);
        // A lowered limit: a peek waits until one lease has gone, a new
        // lease until two have.
        assert_eq!(l.verdict(2, T0 + 2 * S).to_reply(), [1, 2, 0, 8, 10]);
        assert_eq!(acquire(&mut l, 2, T0 + 2 * S, b"d"), [1, 2, 0, 9, 10]);
        assert_eq!(l.verdict(2, T0 + 10 * S).to_reply(), [0, 2, 0, -1, 2]);
        assert_eq!(acquire(&mut l, 2, T0 + 11 * S, b"d"), [0, 2, 0, -1, 10]);
        // Limit 0 refuses everything, peeks included, with no time to wait.
        assert_eq!(l.verdict(0, T0 + 11 * S).to_reply(), [1, 0, 0, -1, 10]);
        assert_eq!(acquire(&mut l, 0, T0 + 11 * S, b"e"), [1, 0, 0, -1, 10]);
    }

    #[test]
    fn large_sets_decode_and_a_repeated_id_anywhere_is_refused() {
        let held = (0..100_000u32)
            .map(|i| Lease {
                id: format!("lease-{i}").into_bytes(),
                expires_at: T0 + S,
            })
            .collect();
        let l = Leases { held };
        let bytes = l.encode();
        assert_eq!(Leases::decode(&bytes), Some(l.clone()));
        // The last id repeats the first: refused, wherever it is.
        let mut twice = l.clone();
        twice.held.last_mut().unwrap().id = b"lease-0".to_vec();
        assert_eq!(Leases::decode(&twice.encode()), None);
        // A count beyond what the bytes can hold is refused up front.
        let mut lying = vec![FORMAT_VERSION];
        put_varint(&mut lying, u64::MAX >> 1);
        lying.extend_from_slice(&[0, 1]);
        assert_eq!(Leases::decode(&lying), None);
    }

    #[test]
    fn renewing_to_a_shorter_lease_shortens_the_reset() {
        let mut l = Leases::new();
        let (a, v) = l.acquire(5, T0, 60 * S, Some(b"a")).unwrap();
        assert_eq!(v.to_reply(), [0, 5, 4, -1, 60]);
        if let Acquire::Hold { expires_at, .. } = a {
            l.hold(b"a", expires_at, T0);
        }
        let (a, v) = l.acquire(5, T0, 10 * S, Some(b"a")).unwrap();
        assert_eq!(v.to_reply(), [0, 5, 4, -1, 10]);
        if let Acquire::Hold { expires_at, .. } = a {
            l.hold(b"a", expires_at, T0);
        }
        assert_eq!(l.verdict(5, T0).to_reply(), [0, 5, 4, -1, 10]);
        // Another, longer lease still sets the reset.
        l.hold(b"b", T0 + 30 * S, T0);
        let (_, v) = l.acquire(5, T0, 10 * S, Some(b"a")).unwrap();
        assert_eq!(v.to_reply(), [0, 5, 3, -1, 30]);
    }

    proptest! {
        /// Never more than `limit` live leases; a refusal's wait is when a
        /// slot frees; encoding round-trips; what an acquisition answers is
        /// what a peek right after it sees.
        #[test]
        fn never_more_than_the_limit(
            limit in 0i64..6,
            ops in prop::collection::vec((0i64..3_000, 0u8..8, 0u8..3, 1i64..5_000), 1..150),
        ) {
            let mut l = Leases::new();
            let mut now = T0;
            for (dt_ms, id, op, lease_ms) in ops {
                now += dt_ms * 1_000_000;
                let id = [id];
                match op {
                    0 | 1 => {
                        let (a, v) = l.acquire(limit, now, lease_ms * 1_000_000, Some(&id)).unwrap();
                        match a {
                            Acquire::Hold { expires_at, renewed } => {
                                prop_assert_eq!(renewed, l.holds(&id, now));
                                l.hold(&id, expires_at, now);
                                let after = l.verdict(limit, now);
                                prop_assert_eq!(v.reset_after, after.reset_after);
                                prop_assert_eq!(v.remaining, after.remaining);
                            }
                            Acquire::Refused => {
                                prop_assert!(v.limited);
                                if let Some(wait) = v.retry_after {
                                    let (later, _) = l.acquire(limit, now + wait, 1, Some(&id)).unwrap();
                                    let fits = matches!(later, Acquire::Hold { .. });
                                    prop_assert!(fits);
                                }
                            }
                        }
                    }
                    _ => {
                        let held = l.holds(&id, now);
                        prop_assert_eq!(l.release(&id, now), held);
                    }
                }
                let live = l.iter().filter(|x| x.expires_at > now).count() as i64;
                prop_assert!(live <= limit.max(0));
                // A peek is limited only where quantity 0 cannot fit.
                prop_assert_eq!(l.verdict(limit, now).limited, limit == 0);
                prop_assert_eq!(Leases::decode(&l.encode()), Some(l.clone()));
            }
        }

        #[test]
        fn decode_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..80)) {
            if let Some(l) = Leases::decode(&bytes) {
                prop_assert_eq!(Leases::decode(&l.encode()), Some(l));
            }
        }
    }
}
