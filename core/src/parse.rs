//! Parsing of client arguments: integers and durations in seconds.
//!
//! Inputs are raw bytes from the network, so anything (non-UTF-8, empty,
//! huge, signed) must produce an error value, never a panic.

use crate::NANOS_PER_SEC;

/// Why an argument could not be parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseError {
    /// Not an integer, or outside the signed 64-bit range.
    NotInteger,
    /// Not a number of seconds with at most 9 fractional digits, or too large
    /// to be expressed in 64-bit nanoseconds.
    NotDuration,
}

/// A signed 64-bit integer in the forms Rust and the original redis-cell
/// accept: an optional `+` or `-`, then ASCII digits, nothing else. Runs on
/// every argument and every stored value, so it works on bytes directly.
#[inline]
pub fn integer(arg: &[u8]) -> Result<i64, ParseError> {
    if let Some(value) = few_digits(arg) {
        return Ok(value);
    }
    signed(arg)
}

/// [`integer`] past its fast path: every other form, apart so that the
/// fast path stays small where it is inlined.
#[inline(never)]
fn signed(arg: &[u8]) -> Result<i64, ParseError> {
    if let Some(value) = short_unsigned(arg) {
        return Ok(value);
    }
    let (negative, digits) = match arg.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, arg),
    };
    if digits.is_empty() {
        return Err(ParseError::NotInteger);
    }
    // Accumulate negatively so that i64::MIN parses without overflow.
    let mut value: i64 = 0;
    for &b in digits {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return Err(ParseError::NotInteger);
        }
        value = value
            .checked_mul(10)
            .and_then(|v| v.checked_sub(i64::from(d)))
            .ok_or(ParseError::NotInteger)?;
    }
    if negative {
        Ok(value)
    } else {
        value.checked_neg().ok_or(ParseError::NotInteger)
    }
}

/// `1` to `4` ASCII digits and nothing else: most arguments (a limit, a
/// count, a period in seconds, a quantity), read inline with no call.
/// `None` for anything else.
#[inline]
fn few_digits(arg: &[u8]) -> Option<i64> {
    if arg.is_empty() || arg.len() > 4 {
        return None;
    }
    let mut value = 0;
    for &b in arg {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        value = value * 10 + i64::from(d);
    }
    Some(value)
}

/// `1` to `19` ASCII digits and nothing else that fit in 63 bits: the
/// common argument and stored value (a TAT has 19 digits), read with no
/// overflow check but the last (19 digits fit in 64 unsigned bits): the
/// leading `len % 8` digits one by one, then eight at a time. `None` for
/// anything else, which the general path then reads.
fn short_unsigned(arg: &[u8]) -> Option<i64> {
    if arg.is_empty() || arg.len() > 19 {
        return None;
    }
    let (lead, chunks) = arg.split_at(arg.len() % 8);
    let mut value: u64 = 0;
    for &b in lead {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        value = value * 10 + u64::from(d);
    }
    for chunk in chunks.chunks_exact(8) {
        let chunk: [u8; 8] = chunk.try_into().ok()?;
        value = value * 100_000_000 + eight_digits(chunk)?;
    }
    i64::try_from(value).ok()
}

/// The value of eight ASCII digits, or `None` if any byte is not one:
/// all eight checked and combined in a few word-wide operations.
fn eight_digits(chunk: [u8; 8]) -> Option<u64> {
    const HIGH: u64 = 0xF0F0_F0F0_F0F0_F0F0;
    const ZEROS: u64 = 0x3030_3030_3030_3030;
    let word = u64::from_le_bytes(chunk);
    // A digit is 0x30..=0x39: its high nibble is 3, and still 3 after
    // adding 6 (no byte carries into the next when the first holds).
    if word & HIGH != ZEROS || word.wrapping_add(0x0606_0606_0606_0606) & HIGH != ZEROS {
        return None;
    }
    // The first digit is the lowest byte: pairs, then fours, then eight.
    let digits = word - ZEROS;
    let pairs = (digits * 10 + (digits >> 8)) & 0x00FF_00FF_00FF_00FF;
    let fours = (pairs * 100 + (pairs >> 16)) & 0x0000_FFFF_0000_FFFF;
    Some((fours * 10_000 + (fours >> 32)) & 0xFFFF_FFFF)
}

/// A duration: a number of seconds as [`seconds_as_nanos`] reads it, or a
/// number followed by a unit (`ms`, `s`, `m`, `h`, `d`, in any case) that
/// comes to a whole number of nanoseconds: `500ms`, `1.5s`, `15m`, `1d`.
pub fn duration(arg: &[u8]) -> Result<i64, DurationError> {
    // Whole seconds in a few digits, the common form: no unit, no fraction,
    // no overflow.
    if let Some(seconds) = few_digits(arg) {
        return Ok(seconds * NANOS_PER_SEC);
    }
    let (number, nanos_per_unit) = split_unit(arg);
    if nanos_per_unit == NANOS_PER_SEC {
        return seconds_as_nanos(number).map_err(|_| too_large_or_malformed(number));
    }
    // In nanoseconds per 10^9 units, so that the number's up to 9
    // decimals are carried exactly; the result must be whole.
    let scaled = seconds_as_nanos(number).map_err(|_| too_large_or_malformed(number))?;
    let product = i128::from(scaled) * i128::from(nanos_per_unit);
    if product % i128::from(NANOS_PER_SEC) != 0 {
        return Err(DurationError::Malformed);
    }
    i64::try_from(product / i128::from(NANOS_PER_SEC)).map_err(|_| DurationError::OutOfRange)
}

/// Why a duration could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DurationError {
    /// Not a number of seconds, nor a number with a unit.
    Malformed,
    /// More nanoseconds than 64 bits hold (about 292 years).
    OutOfRange,
}

/// The number and the nanoseconds of its unit (seconds without one).
fn split_unit(arg: &[u8]) -> (&[u8], i64) {
    const UNITS: [(&[u8], i64); 5] = [
        (b"ms", 1_000_000),
        (b"s", NANOS_PER_SEC),
        (b"m", 60 * NANOS_PER_SEC),
        (b"h", 3_600 * NANOS_PER_SEC),
        (b"d", 86_400 * NANOS_PER_SEC),
    ];
    // Every unit is letters: a number ending in a digit has none.
    if arg.last().is_some_and(u8::is_ascii_digit) {
        return (arg, NANOS_PER_SEC);
    }
    for (suffix, nanos) in UNITS {
        if arg.len() > suffix.len() {
            let (number, unit) = arg.split_at(arg.len() - suffix.len());
            if unit.eq_ignore_ascii_case(suffix) && number.last().is_some_and(u8::is_ascii_digit) {
                return (number, nanos);
            }
        }
    }
    (arg, NANOS_PER_SEC)
}

/// A number that failed to parse: out of range if it is well-formed
/// (digits, at most one dot and 9 decimals) but too large.
fn too_large_or_malformed(number: &[u8]) -> DurationError {
    let body = number
        .strip_prefix(b"-")
        .or(number.strip_prefix(b"+"))
        .unwrap_or(number);
    let (whole, frac) = match body.iter().position(|&b| b == b'.') {
        Some(dot) => (&body[..dot], &body[dot + 1..]),
        None => (body, &[][..]),
    };
    let digits = |s: &[u8]| s.iter().all(u8::is_ascii_digit);
    let has_dot = whole.len() != body.len();
    if !whole.is_empty()
        && digits(whole)
        && !(has_dot && frac.is_empty())
        && digits(frac)
        && frac.len() <= 9
    {
        DurationError::OutOfRange
    } else {
        DurationError::Malformed
    }
}

/// A duration given in seconds, as an integer (`60`) or a decimal with at
/// most 9 fractional digits (`0.5`, `1.250000001`), parsed exactly into
/// nanoseconds. A leading `-` is accepted so that the caller can report a
/// non-positive duration by name rather than as malformed.
pub fn seconds_as_nanos(arg: &[u8]) -> Result<i64, ParseError> {
    // Whole seconds of up to 9 digits: no fraction, no overflow.
    if arg.len() <= 9 {
        if let Some(seconds) = short_unsigned(arg) {
            return Ok(seconds * NANOS_PER_SEC);
        }
    }
    let (negative, body) = match arg.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, arg),
    };
    let (whole, frac) = match body.iter().position(|&b| b == b'.') {
        Some(dot) => (&body[..dot], &body[dot + 1..]),
        None => (body, &[][..]),
    };
    let has_dot = whole.len() != body.len();
    if whole.is_empty() && frac.is_empty()
        || has_dot && frac.is_empty()
        || frac.len() > 9
        || !whole.iter().chain(frac).all(u8::is_ascii_digit)
    {
        return Err(ParseError::NotDuration);
    }
    let mut nanos: i64 = 0;
    for &d in whole {
        nanos = nanos
            .checked_mul(10)
            .and_then(|n| n.checked_add(i64::from(d - b'0')))
            .ok_or(ParseError::NotDuration)?;
    }
    nanos = nanos
        .checked_mul(NANOS_PER_SEC)
        .ok_or(ParseError::NotDuration)?;
    let mut frac_nanos: i64 = 0;
    for i in 0..9 {
        let digit = frac.get(i).map_or(0, |d| i64::from(d - b'0'));
        frac_nanos = frac_nanos * 10 + digit;
    }
    nanos = nanos
        .checked_add(frac_nanos)
        .ok_or(ParseError::NotDuration)?;
    Ok(if negative { -nanos } else { nanos })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn integers() {
        assert_eq!(integer(b"15"), Ok(15));
        assert_eq!(integer(b"-3"), Ok(-3));
        assert_eq!(integer(b"+7"), Ok(7));
        assert_eq!(integer(b"9223372036854775807"), Ok(i64::MAX));
        let texts = ["", " 1", "1 ", "1.0", "9223372036854775808", "abc", "-"];
        for bad in texts
            .map(str::as_bytes)
            .into_iter()
            .chain([&b"\xff\xfe"[..]])
        {
            assert_eq!(integer(bad), Err(ParseError::NotInteger), "{bad:?}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(seconds_as_nanos(b"60"), Ok(60 * NANOS_PER_SEC));
        assert_eq!(seconds_as_nanos(b"0.5"), Ok(500_000_000));
        assert_eq!(seconds_as_nanos(b"1.25"), Ok(1_250_000_000));
        assert_eq!(seconds_as_nanos(b".5"), Ok(500_000_000));
        assert_eq!(seconds_as_nanos(b"0.000000001"), Ok(1));
        assert_eq!(seconds_as_nanos(b"-2"), Ok(-2 * NANOS_PER_SEC));
        assert_eq!(seconds_as_nanos(b"0"), Ok(0));
        assert_eq!(
            seconds_as_nanos(b"9223372036"),
            Ok(9_223_372_036 * NANOS_PER_SEC)
        );
        assert_eq!(seconds_as_nanos(b"9223372036.854775807"), Ok(i64::MAX));
        for bad in [
            &b""[..],
            b".",
            b"1.",
            b"-",
            b"1.0000000001",
            b"1e3",
            b"9223372037",
            b"9223372036.854775808",
            b"1..2",
            b"0x10",
            b" 1",
            b"\xff",
            b"1,5",
            b"inf",
            b"NaN",
        ] {
            assert_eq!(
                seconds_as_nanos(bad),
                Err(ParseError::NotDuration),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn durations_with_units() {
        assert_eq!(duration(b"60"), Ok(60 * NANOS_PER_SEC));
        assert_eq!(duration(b"0.5"), Ok(500_000_000));
        assert_eq!(duration(b"500ms"), Ok(500_000_000));
        assert_eq!(duration(b"0.5ms"), Ok(500_000));
        assert_eq!(duration(b"0.000001ms"), Ok(1));
        assert_eq!(duration(b"1.5s"), Ok(1_500_000_000));
        assert_eq!(duration(b"15m"), Ok(900 * NANOS_PER_SEC));
        assert_eq!(duration(b"15M"), Ok(900 * NANOS_PER_SEC));
        assert_eq!(duration(b"1h"), Ok(3_600 * NANOS_PER_SEC));
        assert_eq!(duration(b"1.5h"), Ok(5_400 * NANOS_PER_SEC));
        assert_eq!(duration(b"1d"), Ok(86_400 * NANOS_PER_SEC));
        assert_eq!(duration(b"-2m"), Ok(-120 * NANOS_PER_SEC));
        assert_eq!(duration(b"106751d"), Ok(106_751 * 86_400 * NANOS_PER_SEC));
        for bad in [
            &b""[..],
            b"ms",
            b"s",
            b"1x",
            b"1 s",
            b"1.ms",
            b"5.",
            b"99999999999.",
            b"99999999999.s",
            b"0.0000001ms",
            b"0.0000000001s",
            b"1sm",
            b"1mss",
            b"APROX",
            b"1e3s",
            b"day",
            b"\xffms",
        ] {
            assert_eq!(duration(bad), Err(DurationError::Malformed), "{bad:?}");
        }
        for big in [
            &b"9223372037"[..],
            b"106752d",
            b"99999999999999999999999h",
            b"9223372037s",
        ] {
            assert_eq!(duration(big), Err(DurationError::OutOfRange), "{big:?}");
        }
    }

    proptest! {
        #[test]
        fn durations_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            let _ = duration(&bytes);
        }

        #[test]
        fn unit_durations_scale_exactly(n in 0i64..100_000, unit in 0usize..5) {
            let (suffix, nanos) = [("ms", 1_000_000), ("s", NANOS_PER_SEC), ("m", 60 * NANOS_PER_SEC),
                ("h", 3_600 * NANOS_PER_SEC), ("d", 86_400 * NANOS_PER_SEC)][unit];
            prop_assert_eq!(duration(format!("{n}{suffix}").as_bytes()), Ok(n * nanos));
        }

        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            let _ = integer(&bytes);
            let _ = seconds_as_nanos(&bytes);
        }

        #[test]
        fn integers_parse_as_rust_does(bytes in proptest::collection::vec(
            proptest::sample::select(b"+-0123456789x ".to_vec()), 0..22)) {
            let rust = std::str::from_utf8(&bytes).unwrap().parse::<i64>().ok();
            prop_assert_eq!(integer(&bytes).ok(), rust);
        }

        #[test]
        fn any_i64_round_trips(v in any::<i64>()) {
            prop_assert_eq!(integer(v.to_string().as_bytes()), Ok(v));
        }

        #[test]
        fn eight_digits_at_once(chunk in proptest::array::uniform8(any::<u8>())) {
            let text = std::str::from_utf8(&chunk).ok();
            let expected = text
                .filter(|t| t.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|t| t.parse::<u64>().ok());
            prop_assert_eq!(eight_digits(chunk), expected);
        }

        #[test]
        fn long_digit_strings_parse_as_rust_does(digits in "[0-9]{1,21}", bad in 0usize..25, byte in any::<u8>()) {
            let mut bytes = digits.into_bytes();
            if bad < bytes.len() {
                bytes[bad] = byte;
            }
            let rust = std::str::from_utf8(&bytes).ok().and_then(|t| t.parse::<i64>().ok());
            prop_assert_eq!(integer(&bytes).ok(), rust);
        }

        #[test]
        fn whole_seconds_read_as_decimals(secs in 0i64..100_000_000_000, plus in any::<bool>()) {
            let sign = if plus { "+" } else { "" };
            let whole = format!("{sign}{secs}");
            prop_assert_eq!(
                seconds_as_nanos(whole.as_bytes()),
                seconds_as_nanos(format!("{whole}.0").as_bytes())
            );
            prop_assert_eq!(duration(whole.as_bytes()).ok(), seconds_as_nanos(whole.as_bytes()).ok());
        }

        #[test]
        fn decimal_round_trip(secs in 0i64..9_223_372_035, frac in 0i64..1_000_000_000) {
            let text = format!("{secs}.{frac:09}");
            prop_assert_eq!(seconds_as_nanos(text.as_bytes()), Ok(secs * NANOS_PER_SEC + frac));
        }
    }
}
