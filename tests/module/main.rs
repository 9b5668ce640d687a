//! The module's black-box suite, in one test binary: every test starts
//! real servers (through `testkit`) with the module loaded and talks to them
//! as a client does. `REDIS_SERVER` names the server binary; `scripts/test`
//! runs the suite once per server of the matrix.

// A folder groups a concern's files, one of which may carry its name
// (`policies/policies.rs`).
#![allow(clippy::module_inception)]

/// The repository's root (this suite's package is `tests/`), as a literal
/// that `concat!` takes.
macro_rules! root {
    () => {
        concat!(env!("CARGO_MANIFEST_DIR"), "/..")
    };
}

mod support;
mod twin;

/// Each command's behaviour: replies, grammar, errors, clocks.
mod commands {
    mod calendar;
    mod clock;
    mod clock_steps;
    mod errors;
    mod fixed;
    mod gcra;
    mod grammar;
    mod leases;
    mod reserve_refund;
    mod shadow;
    mod sliding;
    mod throttle;
    mod throttle_all;
    mod top_memory;
}
/// Operators' policies: the registry, its persistence, writes and trials.
mod policies {
    mod policies;
    mod policies_rdb;
    mod policy_writes;
    mod policy_zones;
    mod trials;
}
/// What operators run: replication, persistence, clusters, ACLs, upgrades, hostile clients.
mod operations {
    mod acl;
    mod cluster;
    mod hardening;
    mod hostile;
    mod operations;
    mod persistence;
    mod replication;
    mod upgrade;
}
/// The Functions twin (functions/) against the module, call for call.
mod functions {
    mod bounds;
    mod build;
    mod cases;
    mod diff;
    mod flat;
    mod hostile;
    mod replica;
    mod switch;
}
/// The READMEs, examples and version numbers, replayed and checked.
mod docs {
    mod docs;
    mod examples;
    mod versions;
}
