//! Where a policy's trial keeps its state: a key derived from the key of
//! the call, in the same Redis Cluster hash slot (so that the trial can be
//! written by the command that writes the call's key, on the node that owns
//! it), and never equal to it.
//!
//! The rule, by what the call's key `K` is (a *valid hash tag* is the
//! bytes between the first `{` and the first `}` after it, when there is
//! at least one; a key with one hashes only its tag):
//!
//! 1. `K` has a valid hash tag: `K:cell-trial` (appending leaves the tag,
//!    so the slot, as it is);
//! 2. `K` has none and holds no `}` (and is not empty): `{K}:cell-trial`
//!    (the tag is then `K` whole, which hashes as `K` did);
//! 3. otherwise (`K` holds a `}` but no valid tag, such as `a}b` or
//!    `{}x}`, or is empty): `{T}K:cell-trial`, with `T` the first string
//!    of `0-9a-z` (shortest first, then in byte order) whose slot is `K`'s.

/// What every trial key ends with.
pub const SUFFIX: &[u8] = b":cell-trial";

/// The number of hash slots of a Redis Cluster.
pub const SLOTS: u16 = 16384;

/// CRC-16/XMODEM (polynomial 0x1021, initial value 0), the checksum Redis
/// Cluster hashes keys with.
pub fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in bytes {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The valid hash tag of `key`, if it has one.
pub fn hash_tag(key: &[u8]) -> Option<&[u8]> {
    let open = key.iter().position(|&b| b == b'{')?;
    let rest = key.get(open + 1..)?;
    let close = rest.iter().position(|&b| b == b'}')?;
    (close > 0).then(|| rest.get(..close)).flatten()
}

/// The hash slot of `key`, as Redis Cluster computes it.
pub fn slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key).unwrap_or(key)) % SLOTS
}

/// The trial key of `key` (see the module's rule).
pub fn key(key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len() + SUFFIX.len() + 8);
    if hash_tag(key).is_some() {
        out.extend_from_slice(key);
    } else if !key.is_empty() && !key.contains(&b'}') {
        out.push(b'{');
        out.extend_from_slice(key);
        out.push(b'}');
    } else {
        out.push(b'{');
        out.extend_from_slice(tag_of_slot(slot(key)));
        out.push(b'}');
        out.extend_from_slice(key);
    }
    out.extend_from_slice(SUFFIX);
    out
}

const ALPHABET: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";

/// The first string of `0-9a-z` (shortest first, then in byte order) whose
/// hash slot is `slot`: 1 to 4 characters cover every slot.
pub fn tag_of_slot(slot: u16) -> &'static [u8] {
    static TABLE: std::sync::OnceLock<Vec<([u8; 4], u8)>> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut table = vec![([0u8; 4], 0u8); usize::from(SLOTS)];
        let mut left = usize::from(SLOTS);
        'lengths: for len in 1..=4usize {
            let count = ALPHABET.len().pow(len as u32);
            for n in 0..count {
                let mut word = [0u8; 4];
                let mut rest = n;
                for i in (0..len).rev() {
                    word[i] = ALPHABET[rest % ALPHABET.len()];
                    rest /= ALPHABET.len();
                }
                let s = usize::from(crc16(&word[..len]) % SLOTS);
                if let Some(entry) = table.get_mut(s) {
                    if entry.1 == 0 {
                        *entry = (word, len as u8);
                        left -= 1;
                        if left == 0 {
                            break 'lengths;
                        }
                    }
                }
            }
        }
        table
    });
    table
        .get(usize::from(slot))
        .map(|(word, len)| word.get(..usize::from(*len)).unwrap_or_default())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn crc16_matches_redis() {
        // The check value of CRC-16/XMODEM, and slots Redis documents.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"{user1000}.following"), slot(b"user1000"));
    }

    #[test]
    fn names() {
        assert_eq!(key(b"{u}:sec"), b"{u}:sec:cell-trial");
        assert_eq!(key(b"user:7"), b"{user:7}:cell-trial");
        assert_eq!(key(b"a{b"), b"{a{b}:cell-trial");
        let weird = key(b"a}b");
        assert!(weird.starts_with(b"{") && weird.ends_with(b"}a}b:cell-trial"));
        assert_eq!(slot(&weird), slot(b"a}b"));
        assert_eq!(slot(&key(b"")), slot(b""));
    }

    #[test]
    fn every_slot_has_a_tag() {
        for s in 0..SLOTS {
            let tag = tag_of_slot(s);
            assert!(!tag.is_empty() && tag.len() <= 4, "slot {s}");
            assert_eq!(slot(tag), s);
        }
    }

    proptest! {
        #[test]
        fn same_slot_and_another_key(k in proptest::collection::vec(
            prop_oneof![Just(b'{'), Just(b'}'), Just(b'a'), Just(b':'), any::<u8>()], 0..12)) {
            let t = key(&k);
            prop_assert_eq!(slot(&t), slot(&k));
            prop_assert_ne!(&t, &k);
            prop_assert!(t.ends_with(SUFFIX));
        }
    }
}
