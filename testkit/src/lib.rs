//! The one place that starts test servers. Every suite starts its Redis and
//! Valkey servers, replicas, sentinels and clusters here: the Rust tests as
//! a library, the Python, Node and benchmark harnesses through
//! `testkit serve` (see [`serve`]). One port rule ([`free_port`]), one
//! readiness rule (this very process answers, its modules loaded), one way
//! to form a cluster, and every process killed when its owner goes.

mod cluster;
pub mod resp;
pub mod serve;
mod server;

pub use cluster::{cluster, Sentinel};
pub use resp::{call, Reply};
pub use server::{
    clock_shim, free_port, fresh_dir, module_path, named_dir, no_tls_support, repo_root,
    server_binary, tls_files, version_text, wait, write_clock, Clock, Exit, Server, Spec,
};
