//! Borrowed views of a command's arguments, and their parsing.

use crate::error::CmdError;
use cell_core::options::{self, Found, Opt};
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

    /// Checks that the `n` words a command requires (its name included)
    /// are there; any more are options.
    pub fn require(&self, n: usize) -> Result<(), CmdError> {
        if self.len() >= n {
            Ok(())
        } else {
            Err(CmdError::WrongArity)
        }
    }

    /// Checks the argument count of a replication-only command, whose
    /// forms are fixed: `min..=max` words including the command name.
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

    /// The options from word `from` to the end (docs/grammar.md).
    pub fn options(&self, from: usize, spec: &[Opt]) -> Result<Found<'a>, CmdError> {
        Ok(self.options_until(from, spec, |_| false)?.0)
    }

    /// The options from word `from` up to a `stop` word, and where they
    /// end.
    pub fn options_until(
        &self,
        from: usize,
        spec: &[Opt],
        stop: impl Fn(&[u8]) -> bool,
    ) -> Result<(Found<'a>, usize), CmdError> {
        Ok(options::read(spec, &[], |i| self.bytes(i), from, stop)?)
    }
}

/// A quantity argument: an integer `>= 0`.
pub fn quantity(arg: &[u8]) -> Result<i64, CmdError> {
    Ok(options::quantity(arg)?)
}
