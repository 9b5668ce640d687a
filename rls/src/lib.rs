//! redis-cell-rls: envoyproxy/ratelimit's service (config, API, stats,
//! settings) on redis-cell's commands.
//!
//! Pure parts: `config` (parse, validate, match), `plan` (keys, commands,
//! replies), `decide` (statuses, stats, overall code), `settings`, `stats`,
//! `metadata` (the response's dynamic metadata), `health` (the verdict,
//! and the Redis check and gRPC statuses that follow it).
//! Thin parts: `backend` (Redis), `startup` (its first connection),
//! `service` (gRPC), `http`, `loader`, `net` (listeners, connection bounds),
//! `trace` (OTLP spans and their export).

pub mod backend;
pub mod config;
pub mod decide;
pub mod finish;
pub mod health;
pub mod http;
pub mod loader;
pub mod local_cache;
pub mod log;
pub mod metadata;
pub mod module;
pub mod net;
pub mod plan;
pub mod service;
pub mod settings;
pub mod startup;
pub mod stats;
pub mod tls;
pub mod trace;
pub mod xds;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitServiceServer;
use tokio::net::TcpListener;

use crate::service::{Grpc, State};
use crate::settings::{split_addr, Settings};

async fn bind(host: &str, port: u16) -> std::io::Result<TcpListener> {
    TcpListener::bind((host, port)).await
}

/// The connection caps (per HTTP listener, gRPC) that fit in `nofile`
/// descriptors with room for Redis, the config files and the rest: the
/// configured ones, scaled down when they do not fit.
fn connection_caps(settings: &Settings, nofile: u64) -> (usize, usize) {
    let listeners: u64 = if settings.use_prometheus { 3 } else { 2 };
    let pools = (settings.redis.pool_size as u64).saturating_add(
        settings
            .redis_per_second
            .as_ref()
            .map(|r| r.pool_size as u64)
            .unwrap_or(0),
    );
    let reserve = pools.saturating_mul(2).saturating_add(64);
    let budget = nofile.saturating_sub(reserve).max(listeners + 1);
    let (h, g) = (
        settings.http_max_connections as u64,
        settings.grpc_max_connections as u64,
    );
    let wanted = h.saturating_mul(listeners).saturating_add(g);
    if wanted <= budget {
        return (h as usize, g as usize);
    }
    let scale = |n: u64| (n.saturating_mul(budget) / wanted).max(1) as usize;
    let (h2, g2) = (scale(h), scale(g));
    log::warn(&format!(
        "nofile limit {nofile}: connections capped at {h2} per HTTP listener (HTTP_MAX_CONNECTIONS {h}) and {g2} for gRPC (GRPC_MAX_CONNECTIONS {g})"
    ));
    (h2, g2)
}

/// The process's entry point: the settings from the environment, then
/// [`run`] on a multi-threaded runtime; exits 2 on a setting that does not
/// parse and 1 on a start that fails. Defined here rather than in the
/// binary so that the service's futures are compiled once, with the
/// library: an `async fn` polled only in another crate is compiled there.
pub fn main() {
    let settings = match Settings::from_env() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("redis-cell-rls: {e}");
            std::process::exit(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("redis-cell-rls: cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = runtime.block_on(run(settings)) {
        eprintln!("redis-cell-rls: {e}");
        std::process::exit(1);
    }
}

/// Runs the service until SIGTERM or SIGINT.
pub async fn run(settings: Settings) -> Result<(), Box<dyn std::error::Error>> {
    log::init(&settings.log_level, &settings.log_format);
    let (nofile_before, nofile) = net::raise_nofile();
    if nofile != nofile_before {
        log::info(&format!(
            "nofile limit raised from {nofile_before} to {nofile}"
        ));
    }
    let (http_cap, grpc_cap) = connection_caps(&settings, nofile);
    trace::init(&settings.tracing);
    // Before anything connects or listens: a certificate that cannot be
    // read stops the start, as in the reference.
    let grpc_tls = if settings.grpc_tls.enabled {
        Some(tls::GrpcAcceptor::new(&settings.grpc_tls)?)
    } else {
        None
    };
    // A mapping file that does not parse stops the start, before Redis.
    let stats_options = stats::Options::from_settings(&settings)
        .map_err(|e| format!("PROMETHEUS_MAPPER_YAML: {e}"))?;
    // As the reference: no listener until Redis answers, retried within
    // REDIS_STARTUP_*.
    let backend = startup::connect(&settings.redis, settings.redis_startup).await?;
    let per_second = match &settings.redis_per_second {
        Some(r) => Some(startup::connect(r, settings.redis_startup).await?),
        None => None,
    };
    let state = Arc::new(State {
        cluster: settings.redis.kind == "CLUSTER",
        settings: settings.clone(),
        config: RwLock::new(None),
        backend,
        per_second,
        stats: stats::Stats::with_options(stats_options),
        local_cache: local_cache::LocalCache::new(settings.local_cache_size_in_bytes),
        detached: Arc::new(tokio::sync::Semaphore::new(service::MAX_DETACHED)),
        module_problems: RwLock::new(None),
        module_recheck: tokio::sync::Notify::new(),
    });
    // Before any listener: the first health check and call already know
    // whether Redis can run the commands.
    state.check_modules().await;
    let loaded = if settings.config_type == "GRPC_XDS_SOTW" {
        let mut first = xds::start(state.clone());
        if !settings.force_start_without_initial_config {
            // As the reference: no listener before the first config update
            // (loaded or refused) unless told to start without one.
            log::info("Waiting for initial ratelimit config update event");
            let _ = first.wait_for(|v| *v).await;
        }
        state.current_config().is_some()
    } else {
        let first = {
            let state = state.clone();
            tokio::task::spawn_blocking(move || loader::load(&state)).await?
        };
        if first.is_err() && !settings.force_start_without_initial_config {
            log::warn("starting without a valid configuration: every call fails until one loads");
        }
        loader::watch(state.clone())?;
        first.is_ok()
    };
    let has_domains = |state: &State| state.current_config().is_some_and(|c| !c.is_empty());
    let health = Arc::new(health::Health::new(
        !settings.healthy_with_at_least_one_config_loaded || (loaded && has_domains(&state)),
    ));
    health.set(health::Part::Module, state.module_problem().is_none());
    if settings.healthy_with_at_least_one_config_loaded {
        // As the reference: healthy while the last configuration loaded has
        // a domain (one without any makes the service unhealthy again).
        let (state, health) = (state.clone(), health.clone());
        tokio::spawn(async move {
            loop {
                health.set(health::Part::Config, has_domains(&state));
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
        });
    }
    if settings.redis_health_check_active_connection {
        tokio::spawn(health::follow_redis(state.clone(), health.clone()));
    }
    let web = Arc::new(http::Http {
        state: state.clone(),
        healthy: health.ok.clone(),
    });
    // gRPC's listener first: once /healthcheck answers, calls are taken.
    let (grpc_l, grpc_at) = if settings.grpc_uds.is_empty() {
        let addr: SocketAddr =
            tokio::net::lookup_host((settings.grpc_host.as_str(), settings.grpc_port))
                .await?
                .next()
                .ok_or("GRPC_HOST: no address")?;
        let l = TcpListener::bind(addr).await?;
        (net::GrpcListener::Tcp(l), addr.to_string())
    } else {
        let l = net::bind_uds(&settings.grpc_uds).await?;
        (net::GrpcListener::Unix(l), settings.grpc_uds.clone())
    };
    let main_l = bind(&settings.host, settings.port).await?;
    tokio::spawn(http::serve(main_l, http::Site::Main, web.clone(), http_cap));
    let debug_l = bind(&settings.debug_host, settings.debug_port).await?;
    tokio::spawn(http::serve(
        debug_l,
        http::Site::Debug,
        web.clone(),
        http_cap,
    ));
    if settings.use_prometheus {
        let (h, p) = split_addr(&settings.prometheus_addr).ok_or_else(|| {
            format!(
                "PROMETHEUS_ADDR: invalid address '{}'",
                settings.prometheus_addr
            )
        })?;
        let l = bind(&h, p).await?;
        tokio::spawn(http::serve(l, http::Site::Metrics, web.clone(), http_cap));
    }
    if (settings.use_statsd || settings.use_dog_statsd) && !settings.disable_stats {
        state.stats.statsd.store(true, Ordering::Relaxed);
        let state = state.clone();
        tokio::spawn(async move {
            let Ok(sock) = tokio::net::UdpSocket::bind(("127.0.0.1", 0)).await else {
                log::error("statsd: cannot open a UDP socket");
                return;
            };
            let target = format!(
                "{}:{}",
                state.settings.statsd_host, state.settings.statsd_port
            );
            loop {
                tokio::time::sleep(state.settings.stats_flush_interval).await;
                let st = state.clone();
                // Many series take a while to format: off the request threads.
                let lines = tokio::task::spawn_blocking(move || st.stats.statsd_lines())
                    .await
                    .unwrap_or_default();
                for chunk in lines.chunks(20) {
                    let _ = sock.send_to(chunk.join("\n").as_bytes(), &target).await;
                }
            }
        });
    }
    let (reporter, health_service) = tonic_health::server::health_reporter();
    {
        // The gRPC health service follows the verdict /healthcheck gives
        // (watched before the first report, so no change falls between).
        let mut changed = health.subscribe();
        health::report(&reporter, *changed.borrow_and_update()).await;
        let reporter = reporter.clone();
        tokio::spawn(async move {
            while changed.changed().await.is_ok() {
                let ok = *changed.borrow_and_update();
                health::report(&reporter, ok).await;
            }
        });
    }
    {
        // The module, checked again on a timer (sooner while it is
        // missing) and at once when a call finds a command unknown;
        // unhealthy while it is missing.
        let (state, health) = (state.clone(), health.clone());
        tokio::spawn(async move {
            loop {
                let ok = state.module_problem().is_none();
                health.set(health::Part::Module, ok);
                let wait = if ok {
                    service::MODULE_CHECK_EVERY
                } else {
                    service::MODULE_RECHECK_EVERY
                };
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = state.module_recheck.notified() => {}
                }
                state.check_modules().await;
            }
        });
    }
    log::warn(&format!(
        "redis-cell-rls listening: grpc {grpc_at}, http {}:{}",
        settings.host, settings.port
    ));
    let shutdown = async move {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("a SIGTERM handler");
        tokio::select! {
            _ = term.recv() => {},
            _ = tokio::signal::ctrl_c() => {},
        }
        // Never healthy again once stopping.
        health.stop();
        health::report(&reporter, false).await;
    };
    let incoming = net::grpc_incoming(
        grpc_l,
        grpc_cap,
        settings.grpc_handshake_timeout,
        settings.grpc_max_connection_idle,
        grpc_tls,
    );
    tonic::transport::Server::builder()
        .max_concurrent_streams(settings.grpc_max_concurrent_streams)
        .concurrency_limit_per_connection(settings.grpc_max_concurrent_streams as usize)
        .max_connection_age(settings.grpc_max_connection_age)
        .max_connection_age_grace(settings.grpc_max_connection_age_grace)
        // A stream whose body never comes would keep its connection busy
        // (never idle, never closed for a newer one); its decision, once
        // started, finishes on its own task whatever this cuts.
        .timeout(settings.grpc_request_timeout)
        // A peer that stops answering pings is gone: its connection closes.
        .http2_keepalive_interval(Some(Duration::from_secs(60)))
        .http2_keepalive_timeout(Some(Duration::from_secs(20)))
        .add_service(net::Tracked(health_service))
        .add_service(net::Tracked(RateLimitServiceServer::new(Grpc(state))))
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await?;
    if !settings.grpc_uds.is_empty() {
        // As Go's listener does on close: the next start finds no socket.
        let _ = tokio::fs::remove_file(&settings.grpc_uds).await;
    }
    // As the reference shuts its tracer provider down: what is queued is
    // sent, for at most 5 s.
    trace::shutdown(Duration::from_secs(5)).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_caps_fit_in_the_nofile_limit() {
        let s = Settings::from_lookup(&|_| None).unwrap();
        assert_eq!(connection_caps(&s, 1 << 20), (256, 4096));
        // 1024 - 64 - 2 * 10 for Redis = 940 descriptors for 2 * 256 + 4096.
        let (h, g) = connection_caps(&s, 1024);
        assert_eq!((h, g), (52, 835));
        assert!(2 * h + g <= 940);
        assert_eq!(connection_caps(&s, 10), (1, 2), "at least one each");
        // Any pool size an operator writes: capped, never an overflow.
        let mut huge = s.clone();
        huge.redis.pool_size = usize::MAX;
        assert_eq!(connection_caps(&huge, 1024), (1, 2));
    }
}
