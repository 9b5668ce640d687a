//! The decimal text of an integer, written without allocating: the module
//! writes every stored value and every replicated number this way (a TAT
//! has 19 digits, an expiry 13), so it works eight digits at a time.

/// Room for any `i64` with its sign, rounded up to whole blocks of eight.
pub const DIGITS: usize = 24;

/// Writes `v` in decimal at the end of `buf` and answers the text: an
/// optional `-` then the digits, without leading zeros (`0` for zero), as
/// `v.to_string()` writes it.
pub fn write_i64(v: i64, buf: &mut [u8; DIGITS]) -> &[u8] {
    const BLOCK: u64 = 100_000_000;
    let mut n = v.unsigned_abs();
    // Blocks of eight digits from the right: at most three (2^63 has 19).
    let mut start = DIGITS;
    for block in buf.rchunks_exact_mut(8) {
        let (rest, last) = (n / BLOCK, n % BLOCK);
        block.copy_from_slice(&eight(last as u32).to_le_bytes());
        start -= 8;
        n = rest;
        if n == 0 {
            // The block's first byte is its most significant digit: skip its
            // leading zeros, keeping one digit.
            let zeros = (u64::from_le_bytes(to_array(block)) ^ ZEROS).trailing_zeros() / 8;
            start += (zeros as usize).min(7);
            break;
        }
    }
    if v < 0 {
        // The first block holds at most three digits (2^63 < 10^19), so
        // there is room before them.
        start -= 1;
        if let Some(b) = buf.get_mut(start) {
            *b = b'-';
        }
    }
    buf.get(start..).unwrap_or_default()
}

const ZEROS: u64 = 0x3030_3030_3030_3030;

fn to_array(block: &[u8]) -> [u8; 8] {
    let mut a = [0; 8];
    a.copy_from_slice(block);
    a
}

/// The eight ASCII digits of `x < 10^8`, the most significant in the
/// lowest byte: split into halves of four digits, each half into pairs,
/// each pair into digits, all lanes of a word at once (each lane's value
/// stays below the next lane, so no division carries across).
fn eight(x: u32) -> u64 {
    let x = u64::from(x);
    // Two 32-bit lanes: the first four digits, then the last four.
    let fours = (x / 10_000) | ((x % 10_000) << 32);
    // `/ 100` of each lane (exact below 43,699).
    let hundreds = ((fours * 10_486) >> 20) & 0x0000_007F_0000_007F;
    let pairs = ((fours - hundreds * 100) << 16) | hundreds;
    // `/ 10` of each 16-bit lane (exact below 179).
    let tens = ((pairs * 103) >> 10) & 0x000F_000F_000F_000F;
    let digits = ((pairs - tens * 10) << 8) | tens;
    digits | ZEROS
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn text(v: i64) -> String {
        let mut buf = [0; DIGITS];
        String::from_utf8(write_i64(v, &mut buf).to_vec()).unwrap()
    }

    #[test]
    fn edges() {
        let mut values = vec![0, 1, -1, 9, 10, 99, 100, i64::MAX, i64::MIN, i64::MIN + 1];
        for p in 1..19 {
            let power = 10i64.pow(p);
            values.extend([power - 1, power, power + 1, -power, 1 - power]);
        }
        for v in values {
            assert_eq!(text(v), v.to_string());
        }
    }

    proptest! {
        #[test]
        fn writes_as_rust_does(v in any::<i64>()) {
            prop_assert_eq!(text(v), v.to_string());
        }

        #[test]
        fn short_numbers_too(v in -100_000_000_000i64..100_000_000_000) {
            prop_assert_eq!(text(v), v.to_string());
        }
    }
}
