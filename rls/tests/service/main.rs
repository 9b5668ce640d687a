//! The service's end-to-end tests, in one test binary: each starts the
//! built `redis-cell-rls` against servers started by `testkit`
//! (`$REDIS_SERVER`), and Envoy where it says so. `rls/test` runs the
//! binary once per server of the matrix.

mod support;

mod cluster;
mod docs;
mod envoy;
mod grpc;
mod hostile_net;
mod hostile_values;
mod live_limits;
mod no_module;
mod restart;
mod sentinel;
mod settings;
mod stats;
mod tls;
mod tls_front;
mod tracing;
mod xds;
mod xds_envoy;
mod xds_server;
