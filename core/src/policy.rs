//! Named policies as data: what a name may be, the counters a policy keeps,
//! and the serialized form of the whole set (what the module saves in an
//! RDB file, beside the keys). The limiter a policy holds is kept as the
//! words that define it, re-read by the module's grammar when loaded.

/// The longest policy name, in bytes.
pub const MAX_NAME: usize = 64;
/// The most policies a server holds.
pub const MAX_POLICIES: usize = 10_000;
/// The most words a policy's limiter may take (kind, parameters, options).
pub const MAX_WORDS: usize = 16;
/// The longest word of a policy's limiter, in bytes.
pub const MAX_WORD: usize = 256;

/// Whether `name` may name a policy: 1 to 64 bytes of `A-Z a-z 0-9 _ . -`.
/// (No `:`, which would make `INFO` lines ambiguous, no spaces, nothing
/// that needs quoting in `redis-cli`.)
pub fn valid_name(name: &[u8]) -> bool {
    (1..=MAX_NAME).contains(&name.len())
        && name
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// What a policy's calls ended as. `calls` is the sum of the other four.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub calls: u64,
    /// Allowed by the policy's limiter.
    pub allowed: u64,
    /// Refused by the policy's limiter, and answered refused.
    pub refused: u64,
    /// Refused by the policy's limiter, but answered allowed: shadow mode.
    pub shadow_refused: u64,
    /// Answered an error (the key's type or value) after the policy was
    /// found.
    pub errors: u64,
}

/// One call's outcome for a policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Allowed,
    Refused,
    ShadowRefused,
    Error,
}

impl Counters {
    pub fn count(&mut self, outcome: Outcome) {
        self.calls = self.calls.saturating_add(1);
        let c = match outcome {
            Outcome::Allowed => &mut self.allowed,
            Outcome::Refused => &mut self.refused,
            Outcome::ShadowRefused => &mut self.shadow_refused,
            Outcome::Error => &mut self.errors,
        };
        *c = c.saturating_add(1);
    }
}

/// A policy as saved: its name, whether it is in shadow mode, the words
/// of its limiter, and the rules of the time zone its limiter names (the
/// TZif data the master read), so that every node decides the same
/// windows whatever its own time zone database holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Saved {
    pub name: Vec<u8>,
    pub shadow: bool,
    pub words: Vec<Vec<u8>>,
    pub zone: Option<Vec<u8>>,
}

/// The largest TZif data a policy carries (the largest file of the IANA
/// database has about 4 KB).
pub const MAX_TZIF: usize = 64 * 1024;

/// Format 1 (0.1.0): no zone rules. Format 2: each policy also carries
/// its zone's rules.
const FORMAT_WORDS: u8 = 1;
const FORMAT: u8 = 2;

/// The set as bytes: a format byte, the number of policies (u32 LE), then
/// per policy its name (u8 length), its shadow flag (u8), its number of
/// words (u8), each word (u16 LE length), and its zone's TZif data (u32
/// LE length, 0 for none).
pub fn encode(policies: &[Saved]) -> Vec<u8> {
    let mut out = vec![FORMAT];
    out.extend_from_slice(&(policies.len() as u32).to_le_bytes());
    for p in policies {
        out.push(p.name.len() as u8);
        out.extend_from_slice(&p.name);
        out.push(u8::from(p.shadow));
        out.push(p.words.len() as u8);
        for w in &p.words {
            out.extend_from_slice(&(w.len() as u16).to_le_bytes());
            out.extend_from_slice(w);
        }
        let zone = p.zone.as_deref().unwrap_or_default();
        out.extend_from_slice(&(zone.len() as u32).to_le_bytes());
        out.extend_from_slice(zone);
    }
    out
}

/// Reads what [`encode`] wrote; anything else (truncated, trailing bytes,
/// an invalid or repeated name, too many policies or words) is `None`.
pub fn decode(data: &[u8]) -> Option<Vec<Saved>> {
    let mut r = Reader(data);
    let format = r.byte()?;
    if format != FORMAT && format != FORMAT_WORDS {
        return None;
    }
    let n = u32::from_le_bytes(r.take(4)?.try_into().ok()?) as usize;
    if n > MAX_POLICIES {
        return None;
    }
    let mut out: Vec<Saved> = Vec::with_capacity(n);
    let mut names = std::collections::HashSet::with_capacity(n);
    for _ in 0..n {
        let len = usize::from(r.byte()?);
        let name = r.take(len)?.to_vec();
        if !valid_name(&name) || !names.insert(name.clone()) {
            return None;
        }
        let shadow = match r.byte()? {
            0 => false,
            1 => true,
            _ => return None,
        };
        let count = usize::from(r.byte()?);
        if count == 0 || count > MAX_WORDS {
            return None;
        }
        let mut words = Vec::with_capacity(count);
        for _ in 0..count {
            let len = usize::from(u16::from_le_bytes(r.take(2)?.try_into().ok()?));
            if len > MAX_WORD {
                return None;
            }
            words.push(r.take(len)?.to_vec());
        }
        let zone = if format == FORMAT {
            let len = u32::from_le_bytes(r.take(4)?.try_into().ok()?) as usize;
            if len > MAX_TZIF {
                return None;
            }
            (len > 0).then(|| r.take(len).map(<[u8]>::to_vec)).flatten()
        } else {
            None
        };
        out.push(Saved {
            name,
            shadow,
            words,
            zone,
        });
    }
    r.0.is_empty().then_some(out)
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    fn byte(&mut self) -> Option<u8> {
        self.take(1)?.first().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn names() {
        assert!(valid_name(b"api-sec"));
        assert!(valid_name(b"A.b_9-z"));
        assert!(valid_name(&[b'x'; 64]));
        assert!(!valid_name(&[b'x'; 65]));
        assert!(!valid_name(b""));
        assert!(!valid_name(b"a:b"));
        assert!(!valid_name(b"a b"));
        assert!(!valid_name(b"caf\xc3\xa9"));
    }

    #[test]
    fn counters_add_up() {
        let mut c = Counters::default();
        for o in [
            Outcome::Allowed,
            Outcome::Refused,
            Outcome::ShadowRefused,
            Outcome::Error,
            Outcome::Allowed,
        ] {
            c.count(o);
        }
        assert_eq!(
            c,
            Counters {
                calls: 5,
                allowed: 2,
                refused: 1,
                shadow_refused: 1,
                errors: 1
            }
        );
    }

    fn saved(name: &str, shadow: bool, words: &[&str]) -> Saved {
        Saved {
            name: name.into(),
            shadow,
            words: words.iter().map(|w| w.as_bytes().to_vec()).collect(),
            zone: None,
        }
    }

    #[test]
    fn round_trip() {
        let set = vec![
            saved("api-sec", false, &["GCRA", "10", "100", "60"]),
            saved("day", true, &["FW", "1000", "day", "TZ", "+09:00"]),
        ];
        assert_eq!(decode(&encode(&set)), Some(set.clone()));
        assert_eq!(decode(&encode(&[])), Some(vec![]));
        let mut zoned = set;
        zoned[1].words = ["FW", "1000", "day", "TZ", "Europe/Berlin"]
            .iter()
            .map(|w| w.as_bytes().to_vec())
            .collect();
        zoned[1].zone = Some(b"TZif2 rules".to_vec());
        assert_eq!(decode(&encode(&zoned)), Some(zoned));
    }

    #[test]
    fn reads_the_format_without_zones() {
        // Written by 0.1.0: format 1, no TZif data after the words.
        let mut old = vec![1u8];
        old.extend_from_slice(&1u32.to_le_bytes());
        old.push(1);
        old.push(b'a');
        old.push(0);
        old.push(3);
        for w in ["SW", "5", "60"] {
            old.extend_from_slice(&(w.len() as u16).to_le_bytes());
            old.extend_from_slice(w.as_bytes());
        }
        assert_eq!(
            decode(&old),
            Some(vec![saved("a", false, &["SW", "5", "60"])])
        );
    }

    #[test]
    fn refuses_damage() {
        let set = vec![saved("a", false, &["SW", "5", "60"])];
        let good = encode(&set);
        for cut in 0..good.len() {
            assert_eq!(decode(&good[..cut]), None, "cut at {cut}");
        }
        let mut trailing = good.clone();
        trailing.push(0);
        assert_eq!(decode(&trailing), None);
        let twice = encode(&[set[0].clone(), set[0].clone()]);
        assert_eq!(decode(&twice), None);
        assert_eq!(decode(&encode(&[saved("a:b", false, &["SW"])])), None);
        assert_eq!(decode(&encode(&[saved("a", false, &[])])), None);
    }

    proptest! {
        #[test]
        fn never_panics(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode(&data);
        }
    }
}
