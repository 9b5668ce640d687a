//! The state of one `SW.ALLOW` key, and its self-contained serialisation
//! (used for RDB, `DUMP`/`RESTORE` and AOF rewrites).

use crate::sliding::{self, Log};
use crate::sliding_approx::Counter;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WindowState {
    /// The exact log, and the window it was last recorded with (`None`
    /// only for payloads written before the window was stored).
    Exact { log: Log, window: Option<i64> },
    /// The `APPROX` two-window counter.
    Approx(Counter),
}

/// An exact log without its window (written by the first release, 0.1.0).
const EXACT_LEGACY: u8 = b'L';
/// An exact log with its window.
const EXACT: u8 = b'E';
const APPROX: u8 = b'A';

impl WindowState {
    pub fn encode(&self) -> Vec<u8> {
        match self {
            WindowState::Exact { log, window } => {
                let body = log.encode();
                let mut out = Vec::with_capacity(body.len() + 9);
                match window {
                    Some(w) => {
                        out.push(EXACT);
                        out.extend_from_slice(&w.to_le_bytes());
                    }
                    None => out.push(EXACT_LEGACY),
                }
                out.extend_from_slice(&body);
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

    /// Parses what [`WindowState::encode`] wrote for a state the commands
    /// can produce; anything else is `None`: an APPROX counter needs a
    /// window of at least 1 ns, counts of at least 0, and a window index of
    /// at least 0 whose state expires within 64 bits of nanoseconds (the
    /// commands count from instants at or after the epoch, and refuse a
    /// window that would end past 2262); an exact log, times at or after the
    /// epoch and a newest entry that leaves the window within 64 bits.
    pub fn decode(data: &[u8]) -> Option<Self> {
        let word = |rest: &[u8], i: usize| -> Option<i64> {
            let bytes: [u8; 8] = rest.get(i * 8..i * 8 + 8)?.try_into().ok()?;
            Some(i64::from_le_bytes(bytes))
        };
        match data.split_first()? {
            (&EXACT_LEGACY, rest) => Some(WindowState::Exact {
                log: Log::decode(rest).ok()?,
                window: None,
            }),
            (&EXACT, rest) => {
                let window = word(rest, 0).filter(|&w| w >= 1)?;
                let log = Log::decode(rest.get(8..)?).ok()?;
                // Its newest entry leaves the window within 64 bits.
                if let Some(newest) = log.newest() {
                    newest.checked_add(window)?;
                }
                Some(WindowState::Exact {
                    log,
                    window: Some(window),
                })
            }
            (&APPROX, rest) if rest.len() == 32 => {
                let c = Counter {
                    window: word(rest, 0)?,
                    index: word(rest, 1)?,
                    previous: word(rest, 2)?,
                    current: word(rest, 3)?,
                };
                c.is_valid().then_some(WindowState::Approx(c))
            }
            _ => None,
        }
    }

    /// When the key can expire (Unix ms): once its newest request has left
    /// the window. `None` for an empty log or one whose window is unknown.
    pub fn expire_at_ms(&self) -> Option<i64> {
        match self {
            WindowState::Exact { log, window } => sliding::expire_at_ms(log, (*window)?),
            WindowState::Approx(c) => (c.previous > 0 || c.current > 0).then(|| c.expire_at_ms()),
        }
    }

    /// Heap bytes held beyond the value itself, for `MEMORY USAGE`.
    pub fn heap_bytes(&self) -> usize {
        match self {
            WindowState::Exact { log, .. } => log.heap_bytes(),
            WindowState::Approx(_) => 0,
        }
    }

    /// The work of freeing this value (for lazy freeing): its chunks.
    pub fn free_effort(&self) -> usize {
        match self {
            WindowState::Exact { log, .. } => log.chunk_count().max(1),
            WindowState::Approx(_) => 1,
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
            WindowState::Exact {
                log: log.clone(),
                window: Some(60),
            },
            WindowState::Exact { log, window: None },
            WindowState::Exact {
                log: Log::new(),
                window: Some(1),
            },
            WindowState::Approx(Counter {
                window: 60,
                index: 3,
                previous: 4,
                current: 0,
            }),
        ] {
            assert_eq!(WindowState::decode(&s.encode()), Some(s));
        }
    }

    #[test]
    fn refuses_what_the_commands_cannot_produce() {
        let approx = |window, index, previous, current| {
            WindowState::Approx(Counter {
                window,
                index,
                previous,
                current,
            })
            .encode()
        };
        let max = i64::MAX;
        // The last window index whose state expires within 64 bits.
        let last = max / 60 - 2;
        assert!(WindowState::decode(&approx(60, last, 1, 1)).is_some());
        assert!(WindowState::decode(&approx(60, 0, 1, 1)).is_some());
        for bad in [
            approx(60, -1, 1, 1),
            approx(60, -1_000_000_000, 0, 1),
            approx(60, i64::MIN, 1, 1),
            approx(60, last + 1, 1, 1),
            approx(60, max, 1, 1),
            approx(max, 1, 1, 1),
            approx(0, 1, 1, 1),
            approx(60, 1, -1, 1),
            approx(60, 1, 1, -1),
        ] {
            assert_eq!(WindowState::decode(&bad), None, "{bad:?}");
        }
        // An exact log whose newest entry would leave the window past 2262.
        let mut log = Log::new();
        log.push(max - 10, 1).unwrap();
        let exact = |window| {
            WindowState::Exact {
                log: log.clone(),
                window: Some(window),
            }
            .encode()
        };
        assert!(WindowState::decode(&exact(10)).is_some());
        assert_eq!(WindowState::decode(&exact(11)), None);
    }

    #[test]
    fn payloads_of_the_first_release_still_decode() {
        // DUMP of `SW.ALLOW k 5 10 2` by the first release: 'L' and the log.
        let mut legacy = vec![b'L'];
        let mut log = Log::new();
        log.push(1_700_000_000_000_000_000, 2).unwrap();
        legacy.extend_from_slice(&log.encode());
        let state = WindowState::decode(&legacy).unwrap();
        assert_eq!(state, WindowState::Exact { log, window: None });
        assert_eq!(state.expire_at_ms(), None);
        assert_eq!(state.encode(), legacy);
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
