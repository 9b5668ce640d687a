//! The options of every command, read by one piece of code: after the
//! required arguments, flags (`MS`), keywords with a value (`TZ zone`) and
//! the bare quantity, in any order, each at most once (docs/grammar.md).
//!
//! This reads the options' syntax only; their values (a zone, a duration)
//! are checked by the command, after its required arguments.

use crate::parse;

/// One option a command accepts. Every option of every command is one of
/// the constants below, each with a bit of its own, so that what a call
/// gave is a set of bits and asking for one is a single test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Opt {
    form: Form,
    /// The word that names it (`quantity`, in errors, for the bare one).
    name: &'static str,
    bit: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    /// A word of its own: `MS`.
    Flag,
    /// A word and the value after it: `TZ zone`.
    Keyword,
    /// An integer `>= 0` on its own: `CL.THROTTLE key 15 30 60 2`.
    Quantity,
    /// An integer `>= 0` after its keyword: `QUANTITY 2`.
    NamedQuantity,
}

const fn opt(form: Form, name: &'static str, n: u32) -> Opt {
    assert!(n < 32, "one bit of a u32 per option");
    Opt {
        form,
        name,
        bit: 1 << n,
    }
}

pub const MS: Opt = opt(Form::Flag, "MS", 0);
pub const SHADOW: Opt = opt(Form::Flag, "SHADOW", 1);
pub const APPROX: Opt = opt(Form::Flag, "APPROX", 2);
pub const ALIGN: Opt = opt(Form::Flag, "ALIGN", 3);
pub const TZ: Opt = opt(Form::Keyword, "TZ", 4);
/// The bare quantity of the single-limiter commands (`... 60 2`).
pub const QUANTITY: Opt = opt(Form::Quantity, "quantity", 5);
/// `CL.THROTTLEALL`'s quantity, which needs its keyword (`QUANTITY 2`).
pub const NAMED_QUANTITY: Opt = opt(Form::NamedQuantity, "QUANTITY", 6);
/// `CL.RESERVE`'s longest wait.
pub const MAXWAIT: Opt = opt(Form::Keyword, "MAXWAIT", 7);
/// `CC.ACQUIRE`'s lease id.
pub const ID: Opt = opt(Form::Keyword, "ID", 8);
/// `CL.TOP`'s options.
pub const COUNT: Opt = opt(Form::Keyword, "COUNT", 9);
pub const POLICY: Opt = opt(Form::Keyword, "POLICY", 10);
pub const RESET: Opt = opt(Form::Flag, "RESET", 11);
pub const TRIAL: Opt = opt(Form::Flag, "TRIAL", 12);
/// A fixed window that counts every hit, refused or not.
pub const COUNTALL: Opt = opt(Form::Flag, "COUNTALL", 13);

impl Opt {
    /// Whether `word` names this option (any case); the bare quantity has
    /// no name.
    pub fn is_named(&self, word: &[u8]) -> bool {
        self.form != Form::Quantity && word.eq_ignore_ascii_case(self.name.as_bytes())
    }
}

/// The most keyword values one call can carry: no command takes more than
/// two keywords.
const MAX_VALUES: usize = 4;

/// What was found, asked by option (`found.has(MS)`).
#[derive(Clone, Copy, Debug)]
pub struct Found<'a> {
    /// The bits of the options given.
    given: u32,
    /// Each keyword given: its option's bit and its value.
    values: [(u32, &'a [u8]); MAX_VALUES],
    /// The quantity, if given.
    pub quantity: Option<i64>,
}

impl<'a> Found<'a> {
    /// No option given.
    pub const NONE: Found<'a> = Found {
        given: 0,
        values: [(0, &[]); MAX_VALUES],
        quantity: None,
    };

    /// Whether `opt` was given.
    pub fn has(&self, opt: Opt) -> bool {
        self.given & opt.bit != 0
    }

    /// The value of `opt` (a keyword), if given.
    pub fn value(&self, opt: Opt) -> Option<&'a [u8]> {
        if !self.has(opt) {
            return None;
        }
        self.values
            .iter()
            .find(|(bit, _)| *bit == opt.bit)
            .map(|(_, v)| *v)
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
/// words end or one is a `stop` word (not taken): those of `own` (a
/// limiter's) and of `extra` (the command's). Answers what was found and the
/// position of the first word not taken. Inlined, so that what it finds
/// is built where the caller keeps it.
#[inline]
pub fn read<'a>(
    own: &[Opt],
    extra: &[Opt],
    words: impl Fn(usize) -> Option<&'a [u8]>,
    from: usize,
    stop: impl Fn(&[u8]) -> bool,
) -> Result<(Found<'a>, usize), OptionError<'a>> {
    let mut found = Found::NONE;
    let spec = || own.iter().chain(extra);
    let mut at = from;
    while let Some(word) = words(at) {
        if stop(word) {
            break;
        }
        at += 1;
        // Every option's name is a word of letters, which a number never
        // matches: a number can only be the bare quantity.
        let opt = if looks_numeric(word) {
            spec().find(|o| o.form == Form::Quantity)
        } else {
            spec().find(|o| o.is_named(word))
        };
        let opt = match opt {
            Some(opt) => *opt,
            None => return Err(OptionError::Unknown(word)),
        };
        if found.has(opt) {
            return Err(OptionError::Twice(opt.name));
        }
        found.given |= opt.bit;
        match opt.form {
            Form::Flag => {}
            Form::Keyword => {
                let value = words(at).ok_or(OptionError::NeedsValue(opt.name))?;
                at += 1;
                // Each keyword once, and no command has more than
                // MAX_VALUES: a free slot is always there.
                let slot = found.values.iter_mut().find(|(bit, _)| *bit == 0);
                match slot {
                    Some(slot) => *slot = (opt.bit, value),
                    None => return Err(OptionError::Unknown(word)),
                }
            }
            Form::Quantity => found.quantity = Some(quantity(word)?),
            Form::NamedQuantity => {
                let value = words(at).ok_or(OptionError::NeedsValue(opt.name))?;
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

    #[test]
    fn names_are_letters() {
        // `read` takes a word that looks numeric for the bare quantity
        // without asking the names: none may start like a number.
        let all = [
            MS,
            SHADOW,
            APPROX,
            ALIGN,
            TZ,
            QUANTITY,
            NAMED_QUANTITY,
            MAXWAIT,
            ID,
            COUNT,
            POLICY,
            RESET,
            TRIAL,
            COUNTALL,
        ];
        for opt in all {
            assert!(opt.name.bytes().all(|b| b.is_ascii_alphabetic()), "{opt:?}");
        }
    }

    fn read_all<'a>(
        spec: &[Opt],
        words: &'a [&'a [u8]],
    ) -> Result<(Found<'a>, usize), OptionError<'a>> {
        read(spec, &[], |i| words.get(i).copied(), 0, |_| false)
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
        // A limiter's own options, then the command's.
        let words: &[&[u8]] = &[b"ms", b"2", b"approx"];
        let (f, _) = read(
            &[APPROX],
            &[QUANTITY, MS],
            |i| words.get(i).copied(),
            0,
            |_| false,
        )
        .unwrap();
        assert!(f.has(APPROX) && f.has(MS) && !f.has(SHADOW));
        assert_eq!(f.quantity, Some(2));
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
            read_all(&[MS], &[b"5"]).unwrap_err(),
            OptionError::Unknown(b"5")
        );
        let named = &[NAMED_QUANTITY, MS];
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
        let (f, at) = read(&[APPROX], &[], |i| words.get(i).copied(), 0, |w| w == b"SW").unwrap();
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
