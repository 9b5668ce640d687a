//! The reference's sampler: `ParentBased(TraceIDRatioBased(rate))` of the
//! Go SDK (opentelemetry-go `sdk/trace/sampling.go`). A caller's sampled
//! flag decides for its trace (sampled: always, not sampled: never); a
//! trace that starts here is sampled when the low 63 bits of its id's
//! last 8 bytes fall under `rate * 2^63`, so every service of a trace
//! with the same rate decides alike.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sampler {
    /// Sampled when the id's value is under it; `None`: always.
    bound: Option<u64>,
}

impl Sampler {
    pub fn new(rate: f64) -> Sampler {
        if rate >= 1.0 {
            return Sampler { bound: None };
        }
        // `as` saturates (and NaN, which the settings refuse, would be 0).
        let bound = if rate <= 0.0 {
            0
        } else {
            (rate * (1u64 << 63) as f64) as u64
        };
        Sampler { bound: Some(bound) }
    }

    /// Whether a span of `trace_id` is sampled: the parent's flag when
    /// there is a parent, the ratio otherwise.
    pub fn sampled(&self, parent_sampled: Option<bool>, trace_id: &[u8; 16]) -> bool {
        if let Some(p) = parent_sampled {
            return p;
        }
        match self.bound {
            None => true,
            Some(bound) => {
                let mut low = [0u8; 8];
                low.copy_from_slice(&trace_id[8..]);
                (u64::from_be_bytes(low) >> 1) < bound
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(low: u64) -> [u8; 16] {
        let mut t = [0xabu8; 16];
        t[8..].copy_from_slice(&low.to_be_bytes());
        t
    }

    #[test]
    fn a_parent_decides_for_its_trace() {
        for rate in [0.0, 0.5, 1.0] {
            let s = Sampler::new(rate);
            assert!(s.sampled(Some(true), &id(u64::MAX)));
            assert!(!s.sampled(Some(false), &id(0)));
        }
    }

    #[test]
    fn the_ratio_reads_the_low_63_bits_of_the_id() {
        let half = Sampler::new(0.5);
        // 2^62 is the bound: ids whose value >> 1 is under it.
        assert!(half.sampled(None, &id((1u64 << 63) - 1)));
        assert!(!half.sampled(None, &id(1u64 << 63)));
        assert!(half.sampled(None, &id(0)));
        assert!(!half.sampled(None, &id(u64::MAX)));
        assert!(!Sampler::new(0.0).sampled(None, &id(0)));
        assert!(!Sampler::new(-1.0).sampled(None, &id(0)));
        assert!(Sampler::new(1.0).sampled(None, &id(u64::MAX)));
        assert!(Sampler::new(7.0).sampled(None, &id(u64::MAX)));
    }

    #[test]
    fn the_ratio_holds_over_many_ids() {
        let s = Sampler::new(0.25);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut n = 0;
        for _ in 0..100_000 {
            // splitmix64: ids spread over the whole range.
            x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            n += usize::from(s.sampled(None, &id(z)));
        }
        assert!((24_000..26_000).contains(&n), "{n} of 100000");
    }
}
