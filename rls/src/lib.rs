//! redis-cell-rls: envoyproxy/ratelimit's service (config, API, stats,
//! settings) on redis-cell's commands.
//!
//! Pure parts: `config` (parse, validate, match), `plan` (keys, commands,
//! replies), `decide` (statuses, stats, overall code), `settings`, `stats`.
//! Thin parts: `backend` (Redis), `service` (gRPC), `http`, `loader`,
//! `net` (connection bounds), `trace` (OTLP spans and their export).

pub mod backend;
pub mod config;
pub mod decide;
pub mod http;
pub mod loader;
pub mod log;
pub mod module;
pub mod net;
pub mod plan;
pub mod service;
pub mod settings;
pub mod stats;
pub mod tls;
pub mod trace;
pub mod xds;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitServiceServer;
use tokio::net::TcpListener;

use crate::backend::Backend;
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
    let backend = Backend::connect(&settings.redis).await?;
    let per_second = match &settings.redis_per_second {
        Some(r) => Some(Backend::connect(r).await?),
        None => None,
    };
    let state = Arc::new(State {
        cluster: settings.redis.kind == "CLUSTER",
        settings: settings.clone(),
        config: RwLock::new(None),
        backend,
        per_second,
        stats: stats::Stats::new(settings.stats_max_keys),
        detached: Arc::new(tokio::sync::Semaphore::new(service::MAX_DETACHED)),
        module_problems: RwLock::new(None),
        module_recheck: tokio::sync::Notify::new(),
    });
    // Before any listener: the first health check and call already know
    // whether Redis can run the commands.
    state.check_modules().await;
    let stopping = Arc::new(AtomicBool::new(false));
    let health_turn = Arc::new(std::sync::Mutex::new(()));
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
    let healthy = Arc::new(AtomicBool::new(
        !settings.healthy_with_at_least_one_config_loaded || (loaded && has_domains(&state)),
    ));
    if settings.healthy_with_at_least_one_config_loaded {
        // As the reference: healthy while the last configuration loaded has
        // a domain (one without any makes the service unhealthy again).
        let (state, healthy, stopping) = (state.clone(), healthy.clone(), stopping.clone());
        let turn = health_turn.clone();
        tokio::spawn(async move {
            loop {
                {
                    // Never healthy again once stopping.
                    let _turn = turn.lock().unwrap_or_else(|e| e.into_inner());
                    if stopping.load(Ordering::Relaxed) {
                        break;
                    }
                    healthy.store(has_domains(&state), Ordering::Relaxed);
                }
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
        });
    }
    let web = Arc::new(http::Http {
        state: state.clone(),
        healthy: healthy.clone(),
    });
    // gRPC's listener first: once /healthcheck answers, calls are taken.
    let addr: SocketAddr =
        tokio::net::lookup_host((settings.grpc_host.as_str(), settings.grpc_port))
            .await?
            .next()
            .ok_or("GRPC_HOST: no address")?;
    let grpc_l = TcpListener::bind(addr).await?;
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
    if settings.use_statsd && !settings.disable_stats {
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
    reporter
        .set_service_status("", tonic_health::ServingStatus::Serving)
        .await;
    reporter.set_serving::<RateLimitServiceServer<Grpc>>().await;
    {
        // The module, checked again on a timer (sooner while it is
        // missing) and at once when a call finds a command unknown; the
        // gRPC health service says NOT_SERVING while it is missing.
        let (state, reporter, stopping) = (state.clone(), reporter.clone(), stopping.clone());
        tokio::spawn(async move {
            let mut serving = None;
            loop {
                let ok = state.module_problem().is_none();
                // Once stopping, the status is NOT_SERVING whatever the module.
                if stopping.load(Ordering::Relaxed) {
                    break;
                }
                if serving != Some(ok) {
                    let status = if ok {
                        tonic_health::ServingStatus::Serving
                    } else {
                        tonic_health::ServingStatus::NotServing
                    };
                    reporter.set_service_status("", status).await;
                    reporter
                        .set_service_status(
                            <RateLimitServiceServer<Grpc> as tonic::server::NamedService>::NAME,
                            status,
                        )
                        .await;
                    serving = Some(ok);
                }
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
        "redis-cell-rls listening: grpc {addr}, http {}:{}",
        settings.host, settings.port
    ));
    let shutdown = async move {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("a SIGTERM handler");
        tokio::select! {
            _ = term.recv() => {},
            _ = tokio::signal::ctrl_c() => {},
        }
        {
            let _turn = health_turn.lock().unwrap_or_else(|e| e.into_inner());
            healthy.store(false, Ordering::Relaxed);
            stopping.store(true, Ordering::Relaxed);
        }
        reporter
            .set_service_status("", tonic_health::ServingStatus::NotServing)
            .await;
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
