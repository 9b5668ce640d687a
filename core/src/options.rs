//! The options of every command, read by one piece of code: after the
//! required arguments, flags (`MS`), keywords with a value (`TZ zone`) and
//! the bare quantity, in any order, each at most once (docs/grammar.md).
//!
//! This reads the options' syntax only; their values (a zone, a duration)
//! are checked by the command, after its required arguments.

use crate::parse;

/// One option a command accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opt {
    /// A word of its own: `MS`.
    Flag(&'static str),
    /// A word and the value after it: `TZ zone`.
    Keyword(&'static str),
    /// An integer `>= 0`, on its own (`CL.THROTTLE key 15 30 60 2`) or,
    /// when named, after its keyword (`QUANTITY 2`).
    Quantity(Option<&'static str>),
}

/// The options more than one command takes, spelled once.
pub const MS: Opt = Opt::Flag("MS");
pub const SHADOW: Opt = Opt::Flag("SHADOW");
pub const APPROX: Opt = Opt::Flag("APPROX");
pub const ALIGN: Opt = Opt::Flag("ALIGN");
pub const TZ: Opt = Opt::Keyword("TZ");
/// The bare quantity of the single-limiter commands (`... 60 2`).
pub const QUANTITY: Opt = Opt::Quantity(None);
/// `CL.THROTTLEALL`'s quantity, which needs its keyword (`QUANTITY 2`).
pub const NAMED_QUANTITY: Opt = Opt::Quantity(Some("QUANTITY"));

/// At most this many options per command.
const MAX_OPTS: usize = 8;

/// What was found, asked by option (`found.has(MS)`), whatever its place in
/// the command's list.
#[derive(Clone, Copy, Debug)]
pub struct Found<'a> {
    /// Bit `i`: the option in `opts[i]` was given.
    given: u32,
    opts: [Opt; MAX_OPTS],
    values: [&'a [u8]; MAX_OPTS],
    /// The quantity, if given.
    pub quantity: Option<i64>,
}

impl<'a> Found<'a> {
    /// Whether `opt` was given.
    pub fn has(&self, opt: Opt) -> bool {
        self.slot(opt).is_some()
    }

    /// The value of `opt` (a keyword), if given.
    pub fn value(&self, opt: Opt) -> Option<&'a [u8]> {
        let i = self.slot(opt)?;
        Some(self.values.get(i).copied().unwrap_or_default())
    }

    /// Where `opt` was recorded, looking at the given options only (most
    /// calls give one or none).
    fn slot(&self, opt: Opt) -> Option<usize> {
        let mut given = self.given;
        while given != 0 {
            let i = given.trailing_zeros() as usize;
            if self.opts.get(i) == Some(&opt) {
                return Some(i);
            }
            given &= given - 1;
        }
        None
    }

    fn given_at(&self, i: usize) -> bool {
        self.given & (1 << i) != 0
    }
}

/// Why the options could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptionError<'a> {
    /// A word that is no option of the command.
    Unknown(&'a [u8]),
    /// An option given twice: its name (`quantity` for the bare one).
    Twice(&'static str),
    /// A keyword as the last word.
    NeedsValue(&'static str),
    /// A quantity that is not an integer.
    NotInteger,
    /// A quantity below 0.
    NegativeQuantity,
}

/// Reads the options among `words(from)`, `words(from + 1)`, ... until the
/// words end or one is a `stop` word (not taken). Answers what was found and
/// the position of the first word not taken.
pub fn read<'a>(
    spec: &[Opt],
    words: impl Fn(usize) -> Option<&'a [u8]>,
    from: usize,
    stop: impl Fn(&[u8]) -> bool,
) -> Result<(Found<'a>, usize), OptionError<'a>> {
    let mut found = Found {
        given: 0,
        opts: [Opt::Flag(""); MAX_OPTS],
        values: [&[]; MAX_OPTS],
        quantity: None,
    };
    let mut at = from;
    while let Some(word) = words(at) {
        if stop(word) {
            break;
        }
        at += 1;
        let named = spec.iter().position(|opt| match opt {
            Opt::Flag(name) | Opt::Keyword(name) | Opt::Quantity(Some(name)) => {
                word.eq_ignore_ascii_case(name.as_bytes())
            }
            Opt::Quantity(None) => false,
        });
        let bare = || spec.iter().position(|o| *o == Opt::Quantity(None));
        let (i, opt) = match named.or_else(|| bare().filter(|_| looks_numeric(word))) {
            Some(i) if i < MAX_OPTS => (i, spec.get(i).copied().unwrap_or(Opt::Flag(""))),
            _ => return Err(OptionError::Unknown(word)),
        };
        if found.given_at(i) {
            return Err(OptionError::Twice(match opt {
                Opt::Flag(name) | Opt::Keyword(name) | Opt::Quantity(Some(name)) => name,
                Opt::Quantity(None) => "quantity",
            }));
        }
        found.given |= 1 << i;
        if let Some(slot) = found.opts.get_mut(i) {
            *slot = opt;
        }
        match opt {
            Opt::Flag(_) => {}
            Opt::Keyword(name) => {
                let value = words(at).ok_or(OptionError::NeedsValue(name))?;
                at += 1;
                if let Some(slot) = found.values.get_mut(i) {
                    *slot = value;
                }
            }
            Opt::Quantity(None) => found.quantity = Some(quantity(word)?),
            Opt::Quantity(Some(name)) => {
                let value = words(at).ok_or(OptionError::NeedsValue(name))?;
                at += 1;
                found.quantity = Some(quantity(value)?);
            }
        }
    }
    Ok((found, at))
}

/// Whether a word is meant as a number: it starts with a digit, a sign or
/// a dot (so `1.5` is a bad quantity, while `APROX` is an unknown option).
fn looks_numeric(word: &[u8]) -> bool {
    word.first()
        .is_some_and(|b| b.is_ascii_digit() || matches!(b, b'+' | b'-' | b'.'))
}

/// A quantity: an integer `>= 0`.
pub fn quantity(word: &[u8]) -> Result<i64, OptionError<'static>> {
    match parse::integer(word) {
        Ok(q) if q < 0 => Err(OptionError::NegativeQuantity),
        Ok(q) => Ok(q),
        Err(_) => Err(OptionError::NotInteger),
    }
}

/// A word as an error message shows it: at most 32 bytes, each byte that is
/// not printable ASCII as `?`.
pub fn shown(word: &[u8]) -> Shown {
    let mut shown = Shown {
        bytes: [b'?'; SHOWN],
        len: 0,
    };
    for (slot, &b) in shown.bytes.iter_mut().zip(word) {
        *slot = if (0x20..0x7f).contains(&b) { b } else { b'?' };
        shown.len += 1;
    }
    shown
}

const SHOWN: usize = 32;

/// A word made fit for an error message (see [`shown`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shown {
    bytes: [u8; SHOWN],
    len: usize,
}

impl Shown {
    pub fn as_str(&self) -> &str {
        // Only printable ASCII is ever stored.
        std::str::from_utf8(self.bytes.get(..self.len).unwrap_or_default()).unwrap_or("?")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const THROTTLE: &[Opt] = &[QUANTITY, MS];
    const FW: &[Opt] = &[QUANTITY, ALIGN, TZ, MS];

    fn read_all<'a>(
        spec: &[Opt],
        words: &'a [&'a [u8]],
    ) -> Result<(Found<'a>, usize), OptionError<'a>> {
        read(spec, |i| words.get(i).copied(), 0, |_| false)
    }

    #[test]
    fn any_order() {
        let (f, n) = read_all(FW, &[b"ms", b"TZ", b"+09:00", b"3", b"align"]).unwrap();
        assert_eq!(n, 5);
        assert!(f.has(ALIGN) && f.has(MS) && !f.has(SHADOW));
        assert_eq!(f.value(TZ), Some(&b"+09:00"[..]));
        assert_eq!(f.quantity, Some(3));
        let (f, _) = read_all(FW, &[]).unwrap();
        assert_eq!((f.quantity, f.value(TZ), f.has(MS)), (None, None, false));
        // The same option found wherever the command lists it.
        let (f, _) = read_all(&[MS, ALIGN], &[b"align"]).unwrap();
        assert!(f.has(ALIGN) && !f.has(MS));
    }

    #[test]
    fn errors() {
        assert_eq!(
            read_all(THROTTLE, &[b"FOO"]).unwrap_err(),
            OptionError::Unknown(b"FOO")
        );
        assert_eq!(
            read_all(THROTTLE, &[b"MS", b"ms"]).unwrap_err(),
            OptionError::Twice("MS")
        );
        assert_eq!(
            read_all(THROTTLE, &[b"1", b"2"]).unwrap_err(),
            OptionError::Twice("quantity")
        );
        assert_eq!(
            read_all(THROTTLE, &[b"1.5"]).unwrap_err(),
            OptionError::NotInteger
        );
        assert_eq!(
            read_all(THROTTLE, &[b"-1"]).unwrap_err(),
            OptionError::NegativeQuantity
        );
        assert_eq!(
            read_all(FW, &[b"TZ"]).unwrap_err(),
            OptionError::NeedsValue("TZ")
        );
        // Without a quantity in the spec, a number is an unknown word.
        assert_eq!(
            read_all(&[Opt::Flag("MS")], &[b"5"]).unwrap_err(),
            OptionError::Unknown(b"5")
        );
        let named = &[Opt::Quantity(Some("QUANTITY")), Opt::Flag("MS")];
        assert_eq!(
            read_all(named, &[b"quantity", b"4"]).unwrap().0.quantity,
            Some(4)
        );
        assert_eq!(
            read_all(named, &[b"QUANTITY"]).unwrap_err(),
            OptionError::NeedsValue("QUANTITY")
        );
        assert_eq!(
            read_all(named, &[b"4"]).unwrap_err(),
            OptionError::Unknown(b"4")
        );
    }

    #[test]
    fn stops_before_a_stop_word() {
        let words: &[&[u8]] = &[b"APPROX", b"SW", b"MS"];
        let (f, at) = read(&[APPROX], |i| words.get(i).copied(), 0, |w| w == b"SW").unwrap();
        assert!(f.has(APPROX));
        assert_eq!(at, 1);
    }

    #[test]
    fn shows_words_safely() {
        assert_eq!(shown(b"APROX").as_str(), "APROX");
        assert_eq!(shown(b"a\r\nb\xff").as_str(), "a??b?");
        assert_eq!(shown(&[b'x'; 40]).as_str().len(), 32);
    }

    proptest! {
        #[test]
        fn never_panics(words in proptest::collection::vec(
            proptest::collection::vec(any::<u8>(), 0..6), 0..10)) {
            let words: Vec<&[u8]> = words.iter().map(Vec::as_slice).collect();
            let _ = read_all(FW, &words);
            for w in &words {
                let _ = shown(w).as_str();
            }
        }
    }
}
