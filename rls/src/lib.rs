//! redis-cell-rls: envoyproxy/ratelimit's service (config, API, stats,
//! settings) on redis-cell's commands.
//!
//! Pure parts: `config` (parse, validate, match), `plan` (keys, commands,
//! replies), `decide` (statuses, stats, overall code), `settings`, `stats`.
//! Thin parts: `backend` (Redis), `service` (gRPC), `http`, `loader`.

pub mod backend;
pub mod config;
pub mod decide;
pub mod http;
pub mod loader;
pub mod log;
pub mod plan;
pub mod service;
pub mod settings;
pub mod stats;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitServiceServer;
use tokio::net::TcpListener;

use crate::backend::Backend;
use crate::service::{Grpc, State};
use crate::settings::{split_addr, Settings};

async fn bind(host: &str, port: u16) -> std::io::Result<TcpListener> {
    TcpListener::bind((host, port)).await
}

/// Runs the service until SIGTERM or SIGINT.
pub async fn run(settings: Settings) -> Result<(), Box<dyn std::error::Error>> {
    log::init(&settings.log_level, &settings.log_format);
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
        stats: stats::Stats::default(),
    });
    let first = loader::load(&state);
    if first.is_err() && !settings.force_start_without_initial_config {
        log::warn("starting without a valid configuration: every call fails until one loads");
    }
    let healthy = Arc::new(AtomicBool::new(
        !settings.healthy_with_at_least_one_config_loaded || first.is_ok(),
    ));
    tokio::spawn(loader::watch(state.clone()));
    {
        // Healthy from the first good load when asked to wait for one.
        let (state, healthy) = (state.clone(), healthy.clone());
        tokio::spawn(async move {
            loop {
                if state.current_config().is_some() {
                    healthy.store(true, Ordering::Relaxed);
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
        });
    }
    let web = Arc::new(http::Http {
        state: state.clone(),
        healthy: healthy.clone(),
    });
    let main_l = bind(&settings.host, settings.port).await?;
    tokio::spawn(http::serve(main_l, http::Site::Main, web.clone()));
    let debug_l = bind(&settings.debug_host, settings.debug_port).await?;
    tokio::spawn(http::serve(debug_l, http::Site::Debug, web.clone()));
    if settings.use_prometheus {
        let (h, p) = split_addr(&settings.prometheus_addr).ok_or_else(|| {
            format!(
                "PROMETHEUS_ADDR: invalid address '{}'",
                settings.prometheus_addr
            )
        })?;
        let l = bind(&h, p).await?;
        tokio::spawn(http::serve(l, http::Site::Metrics, web.clone()));
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
                for chunk in state.stats.statsd_lines().chunks(20) {
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
    let addr: SocketAddr =
        tokio::net::lookup_host((settings.grpc_host.as_str(), settings.grpc_port))
            .await?
            .next()
            .ok_or("GRPC_HOST: no address")?;
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
        healthy.store(false, Ordering::Relaxed);
        reporter
            .set_service_status("", tonic_health::ServingStatus::NotServing)
            .await;
    };
    tonic::transport::Server::builder()
        .add_service(health_service)
        .add_service(RateLimitServiceServer::new(Grpc(state)))
        .serve_with_shutdown(addr, shutdown)
        .await?;
    Ok(())
}
