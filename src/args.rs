//! Borrowed views of a command's arguments, and their parsing.

use crate::error::{self, CmdError};
use cell_core::parse;
use redis_module::raw;

/// The arguments of one command call, borrowed from Redis for its duration.
pub struct Args<'a> {
    argv: &'a [*mut raw::RedisModuleString],
}

impl<'a> Args<'a> {
    /// # Safety
    ///
    /// `argv` must point to `argc` valid strings that outlive `'a`, as Redis
    /// guarantees for the arguments of a running command.
    pub unsafe fn new(argv: *mut *mut raw::RedisModuleString, argc: i32) -> Self {
        let argv = match usize::try_from(argc) {
            Ok(n) if !argv.is_null() => {
                // SAFETY: the caller guarantees `argc` valid pointers at `argv`.
                unsafe { std::slice::from_raw_parts(argv, n) }
            }
            _ => &[],
        };
        Self { argv }
    }

    pub fn len(&self) -> usize {
        self.argv.len()
    }

    /// The raw string at `i` (0 is the command name).
    pub fn raw(&self, i: usize) -> Option<*mut raw::RedisModuleString> {
        self.argv.get(i).copied()
    }

    /// The bytes at `i`.
    pub fn bytes(&self, i: usize) -> Option<&'a [u8]> {
        let s = self.raw(i)?;
        let mut len: libc::size_t = 0;
        let ptr = raw::string_ptr_len(s, &mut len);
        if ptr.is_null() {
            return Some(&[]);
        }
        // SAFETY: Redis returns a pointer to `len` bytes owned by the
        // argument string, which lives as long as the command runs.
        Some(unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) })
    }

    /// The bytes at `i`, empty past the end (for positions the arity check
    /// has already guaranteed).
    pub fn word(&self, i: usize) -> &'a [u8] {
        self.bytes(i).unwrap_or_default()
    }

    /// Checks the argument count: `min..=max` including the command name.
    pub fn expect_len(&self, min: usize, max: usize) -> Result<(), CmdError> {
        if (min..=max).contains(&self.len()) {
            Ok(())
        } else {
            Err(CmdError::WrongArity)
        }
    }

    pub fn integer(&self, i: usize) -> Result<i64, CmdError> {
        Ok(parse::integer(self.word(i))?)
    }

    /// The optional words from `from` on, in any order: each of `flags`
    /// (case-insensitive) at most once, and, when `with_quantity`, at most
    /// one quantity (an integer `>= 0`; 1 when absent). A repeated flag or
    /// quantity is a syntax error; any other word is read as the quantity.
    pub fn options(
        &self,
        from: usize,
        flags: &[&str],
        with_quantity: bool,
    ) -> Result<Options, CmdError> {
        let mut options = Options {
            quantity: 1,
            flags: 0,
        };
        let mut quantity_seen = false;
        for j in from..self.len() {
            let word = self.word(j);
            match flags
                .iter()
                .position(|f| word.eq_ignore_ascii_case(f.as_bytes()))
            {
                Some(bit) if options.flags & (1 << bit) == 0 => options.flags |= 1 << bit,
                Some(_) => return Err(error::SYNTAX),
                None if with_quantity && !quantity_seen => {
                    options.quantity = quantity(word)?;
                    quantity_seen = true;
                }
                None => return Err(error::SYNTAX),
            }
        }
        Ok(options)
    }
}

/// What [`Args::options`] found.
#[derive(Clone, Copy)]
pub struct Options {
    pub quantity: i64,
    flags: u32,
}

impl Options {
    /// Whether the `i`-th flag of the list given to [`Args::options`] was set.
    pub fn has(&self, i: u32) -> bool {
        self.flags & (1 << i) != 0
    }
}

/// A quantity argument: an integer `>= 0`.
pub fn quantity(arg: &[u8]) -> Result<i64, CmdError> {
    match parse::integer(arg)? {
        q if q < 0 => Err(error::NEGATIVE_QUANTITY),
        q => Ok(q),
    }
}
