//! Integer emulation of the two floating-point steps of the original
//! redis-cell, so that replies agree with it bit for bit without using floats.

/// `((a as f64) / (b as f64)) as i64` for `a, b >= 1`, computed exactly with
/// integers: both operands are rounded to 53 significant bits (ties to even),
/// the quotient is rounded the same way, then truncated (saturating, like
/// Rust's float-to-int cast).
pub fn f64_quotient_trunc(a: u64, b: u64) -> u64 {
    if a == 0 || b == 0 {
        return 0;
    }
    // Both exact in f64 and dividing evenly: the quotient is exact too (the
    // common case, such as 60 s / 30), no rounding to emulate.
    if a < 1 << 53 && b < 1 << 53 && a.is_multiple_of(b) {
        return a / b;
    }
    let (ma, ea) = round_to_53_bits(a);
    let (mb, eb) = round_to_53_bits(b);
    let (la, lb) = (bit_len(ma as u128), bit_len(mb as u128));
    // Scale the numerator so that the integer quotient has 55 or 56
    // significant bits plus a sticky remainder; ma << s stays below 2^108.
    let s = 55 + lb - la;
    let num = (ma as u128) << s;
    let q = num / mb as u128;
    let sticky = !num.is_multiple_of(mb as u128);
    let drop = bit_len(q) - 53;
    let mut mant = q >> drop;
    let rest = q & ((1u128 << drop) - 1);
    let half = 1u128 << (drop - 1);
    if rest > half || (rest == half && (sticky || mant & 1 == 1)) {
        mant += 1;
    }
    let k = drop as i64 - s as i64 + ea as i64 - eb as i64;
    if k >= 0 {
        if bit_len(mant) as i64 + k > 63 {
            return i64::MAX as u64;
        }
        (mant << k) as u64
    } else if -k >= 128 {
        0
    } else {
        (mant >> (-k)) as u64
    }
}

/// `x ≈ m * 2^e` with `m < 2^53`, rounded to nearest, ties to even.
fn round_to_53_bits(x: u64) -> (u64, u32) {
    let len = bit_len(x as u128);
    if len <= 53 {
        return (x, 0);
    }
    let drop = len - 53;
    let mut m = x >> drop;
    let rest = x & ((1u64 << drop) - 1);
    let half = 1u64 << (drop - 1);
    if rest > half || (rest == half && m & 1 == 1) {
        m += 1;
    }
    (m, drop)
}

fn bit_len(x: u128) -> u32 {
    128 - x.leading_zeros()
}

/// Whole microseconds of a nanosecond duration, truncated toward zero.
pub fn whole_micros(ns: i128) -> i128 {
    crate::div(ns, 1_000)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn reference(a: u64, b: u64) -> u64 {
        ((a as f64) / (b as f64)) as i64 as u64
    }

    #[test]
    fn small_exact_quotients() {
        assert_eq!(f64_quotient_trunc(60_000_000_000, 30), 2_000_000_000);
        assert_eq!(f64_quotient_trunc(1_000_000_000, 3), 333_333_333);
        assert_eq!(f64_quotient_trunc(1, 2), 0);
        assert_eq!(f64_quotient_trunc(u64::MAX >> 1, 1), i64::MAX as u64);
    }

    #[test]
    fn rounding_cases_that_integer_division_gets_wrong() {
        for (a, b) in [
            ((1u64 << 60) - 1, 1u64 << 60),
            ((1 << 55) + 1, 3),
            (9_007_199_254_740_993, 1),
            (i64::MAX as u64, 7),
            (i64::MAX as u64, i64::MAX as u64),
        ] {
            assert_eq!(f64_quotient_trunc(a, b), reference(a, b), "{a}/{b}");
        }
    }

    proptest! {
        #[test]
        fn matches_float_division(a in 1u64..=i64::MAX as u64, b in 1u64..=i64::MAX as u64) {
            prop_assert_eq!(f64_quotient_trunc(a, b), reference(a, b));
        }

        #[test]
        fn matches_float_division_near_powers(sa in 0u32..63, sb in 0u32..63, da in -3i64..3, db in -3i64..3) {
            let a = ((1i64 << sa) + da).max(1) as u64;
            let b = ((1i64 << sb) + db).max(1) as u64;
            prop_assert_eq!(f64_quotient_trunc(a, b), reference(a, b));
        }
    }
}
