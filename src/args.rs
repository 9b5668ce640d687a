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

    /// Checks the argument count: `min..=max` including the command name.
    pub fn expect_len(&self, min: usize, max: usize) -> Result<(), CmdError> {
        if (min..=max).contains(&self.len()) {
            Ok(())
        } else {
            Err(CmdError::WrongArity)
        }
    }

    pub fn integer(&self, i: usize) -> Result<i64, CmdError> {
        Ok(parse::integer(self.bytes(i).unwrap_or_default())?)
    }

    /// A duration in seconds (integer or up to 9 decimals), in nanoseconds.
    pub fn seconds(&self, i: usize) -> Result<i64, CmdError> {
        Ok(parse::seconds_as_nanos(self.bytes(i).unwrap_or_default())?)
    }

    /// The optional quantity at `i`: 1 when absent, an error when negative.
    pub fn quantity(&self, i: usize) -> Result<i64, CmdError> {
        match self.bytes(i) {
            None => Ok(1),
            Some(b) => quantity(b),
        }
    }

    /// `[quantity] [FLAG]` from position `i` on, in either order: the
    /// quantity (default 1) and whether `flag` was given.
    pub fn quantity_and_flag(&self, i: usize, flag: &str) -> Result<(i64, bool), CmdError> {
        let (mut q, mut seen) = (None, false);
        for j in i..self.len() {
            let b = self.bytes(j).unwrap_or_default();
            if b.eq_ignore_ascii_case(flag.as_bytes()) {
                if seen {
                    return Err(error::SYNTAX);
                }
                seen = true;
            } else if q.is_some() {
                return Err(error::SYNTAX);
            } else {
                q = Some(quantity(b)?);
            }
        }
        Ok((q.unwrap_or(1), seen))
    }

    /// A non-negative integer limit at `i`.
    pub fn limit(&self, i: usize) -> Result<i64, CmdError> {
        match self.integer(i)? {
            l if l < 0 => Err(error::NEGATIVE_LIMIT),
            l => Ok(l),
        }
    }

    /// A positive window in seconds at `i`, in nanoseconds.
    pub fn window(&self, i: usize) -> Result<i64, CmdError> {
        match self.seconds(i)? {
            w if w < 1 => Err(error::WINDOW_NOT_POSITIVE),
            w => Ok(w),
        }
    }
}

fn quantity(arg: &[u8]) -> Result<i64, CmdError> {
    match parse::integer(arg)? {
        q if q < 0 => Err(error::NEGATIVE_QUANTITY),
        q => Ok(q),
    }
}
