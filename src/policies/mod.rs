//! The server's named policies and what the limiters refused: the policy
//! set (`CL.POLICY`), each policy's counters, and the top-offender
//! summaries (`CL.TOP`). This is server configuration, not keys: it lives
//! in module memory, is saved in RDB files as the module's auxiliary data
//! (the `cell-pols` type, which holds no keys), reaches replicas by full
//! sync and by the replication of `CL.POLICY SET`/`DEL`, and is counted
//! per node. Every load of an RDB (a restart, `DEBUG RELOAD`, a full sync)
//! ends with exactly the file's set, none if the file has no set.
//!
//! Commands run on the server's main thread; the lock only makes the
//! static safe to share (an RDB child process reads it after `fork`, when
//! no command holds it).

mod info;
mod persist;
mod registry;
mod words;

pub use info::info;
pub use persist::{replicate_set, subscribe_to_events, POLICY_TYPE, ZONEINFO};
pub use registry::{registry, Found, Refusal, DEFAULT_TOP_CAPACITY, MAX_TOP_CAPACITY};
pub use words::{made_from, made_here, split_trial};
