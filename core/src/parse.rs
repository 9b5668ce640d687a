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
pub fn integer(arg: &[u8]) -> Result<i64, ParseError> {
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

/// A duration given in seconds, as an integer (`60`) or a decimal with at
/// most 9 fractional digits (`0.5`, `1.250000001`), parsed exactly into
/// nanoseconds. A leading `-` is accepted so that the caller can report a
/// non-positive duration by name rather than as malformed.
pub fn seconds_as_nanos(arg: &[u8]) -> Result<i64, ParseError> {
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
        for bad in [
            &b""[..],
            b" 1",
            b"1 ",
            b"1.0",
            b"9223372036854775808",
            b"abc",
            b"\xff\xfe",
            b"-",
        ] {
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

    proptest! {
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
        fn decimal_round_trip(secs in 0i64..9_223_372_035, frac in 0i64..1_000_000_000) {
            let text = format!("{secs}.{frac:09}");
            prop_assert_eq!(seconds_as_nanos(text.as_bytes()), Ok(secs * NANOS_PER_SEC + frac));
        }
    }
}
