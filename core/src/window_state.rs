//! The state of one `SW.ALLOW` key, and its self-contained serialisation
//! (used for RDB, `DUMP`/`RESTORE` and AOF rewrites).

use crate::sliding::Log;
use crate::sliding_approx::Counter;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WindowState {
    /// The exact log.
    Exact(Log),
    /// The `APPROX` two-window counter.
    Approx(Counter),
}

const EXACT: u8 = b'L';
const APPROX: u8 = b'A';

impl WindowState {
    pub fn encode(&self) -> Vec<u8> {
        match self {
            WindowState::Exact(log) => {
                let mut out = vec![EXACT];
                out.extend_from_slice(&log.encode());
                out
            }
            WindowState::Approx(c) => {
                let mut out = Vec::with_capacity(33);
                out.push(APPROX);
                for v in [c.window, c.index, c.previous, c.current] {
                    out.extend_from_slice(&v.to_le_bytes());
                }
                out
            }
        }
    }

    /// Parses what [`WindowState::encode`] wrote; anything else is `None`.
    pub fn decode(data: &[u8]) -> Option<Self> {
        match data.split_first()? {
            (&EXACT, rest) => Log::decode(rest).ok().map(WindowState::Exact),
            (&APPROX, rest) if rest.len() == 32 => {
                let field = |i: usize| {
                    let bytes: [u8; 8] = rest.get(i * 8..i * 8 + 8)?.try_into().ok()?;
                    Some(i64::from_le_bytes(bytes))
                };
                let c = Counter {
                    window: field(0)?,
                    index: field(1)?,
                    previous: field(2)?,
                    current: field(3)?,
                };
                let valid = c.window >= 1 && c.previous >= 0 && c.current >= 0;
                valid.then_some(WindowState::Approx(c))
            }
            _ => None,
        }
    }

    /// Heap bytes held beyond the value itself, for `MEMORY USAGE`.
    pub fn heap_bytes(&self) -> usize {
        match self {
            WindowState::Exact(log) => log.heap_bytes(),
            WindowState::Approx(_) => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trips() {
        let mut log = Log::new();
        log.push(5, 1).unwrap();
        log.push(9, 3).unwrap();
        for s in [
            WindowState::Exact(log),
            WindowState::Exact(Log::new()),
            WindowState::Approx(Counter {
                window: 60,
                index: -3,
                previous: 4,
                current: 0,
            }),
        ] {
            assert_eq!(WindowState::decode(&s.encode()), Some(s));
        }
    }

    proptest! {
        #[test]
        fn decode_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..80)) {
            if let Some(s) = WindowState::decode(&bytes) {
                prop_assert_eq!(WindowState::decode(&s.encode()), Some(s));
            }
        }
    }
}
