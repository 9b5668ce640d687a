//! The service's health, as the reference's health checker keeps it: one
//! verdict from parts that each can make it unhealthy (Redis reachable,
//! with `REDIS_HEALTH_CHECK_ACTIVE_CONNECTION`; a configuration with a
//! domain, with `HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED`; the module
//! present; not stopping), read by `/healthcheck` and followed by the gRPC
//! health service. The verdict is pure; `report` and `follow_redis` are
//! the thin parts that publish it and ping Redis.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitServiceServer;
use tokio::sync::watch;

use crate::log;
use crate::service::{Grpc, State};

/// What the verdict is made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// Redis answers (followed only with `REDIS_HEALTH_CHECK_ACTIVE_CONNECTION`).
    Redis,
    /// The last configuration loaded has a domain (followed only with
    /// `HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED`).
    Config,
    /// Every server has the module the service needs.
    Module,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Parts {
    redis: bool,
    config: bool,
    module: bool,
    stopping: bool,
}

impl Parts {
    fn healthy(&self) -> bool {
        self.redis && self.config && self.module && !self.stopping
    }
}

pub struct Health {
    parts: Mutex<Parts>,
    /// The verdict, as `/healthcheck` reads it.
    pub ok: Arc<AtomicBool>,
    changed: watch::Sender<bool>,
}

impl Health {
    /// Healthy in every part but the configuration's, which starts as
    /// `config` says.
    pub fn new(config: bool) -> Health {
        let parts = Parts {
            redis: true,
            config,
            module: true,
            stopping: false,
        };
        let (changed, _) = watch::channel(parts.healthy());
        Health {
            ok: Arc::new(AtomicBool::new(parts.healthy())),
            parts: Mutex::new(parts),
            changed,
        }
    }

    fn update(&self, f: impl FnOnce(&mut Parts)) {
        let mut p = self.parts.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut p);
        let ok = p.healthy();
        // Under the lock: the flag and the watchers see the verdicts in
        // the order they were reached.
        self.ok.store(ok, Ordering::Relaxed);
        self.changed
            .send_if_modified(|v| std::mem::replace(v, ok) != ok);
    }

    pub fn set(&self, part: Part, ok: bool) {
        self.update(|p| match part {
            Part::Redis => p.redis = ok,
            Part::Config => p.config = ok,
            Part::Module => p.module = ok,
        });
    }

    /// Stopping (SIGTERM): unhealthy from now on, whatever the parts.
    pub fn stop(&self) {
        self.update(|p| p.stopping = true);
    }

    pub fn healthy(&self) -> bool {
        self.ok.load(Ordering::Relaxed)
    }

    /// The verdict, each time it changes.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.changed.subscribe()
    }
}

/// The gRPC health service's statuses: the server as a whole (`""`), the
/// reference's service name (`ratelimit`) and the RateLimitService's.
pub async fn report(reporter: &tonic_health::server::HealthReporter, ok: bool) {
    let status = if ok {
        tonic_health::ServingStatus::Serving
    } else {
        tonic_health::ServingStatus::NotServing
    };
    for name in [
        "",
        "ratelimit",
        <RateLimitServiceServer<Grpc> as tonic::server::NamedService>::NAME,
    ] {
        reporter.set_service_status(name, status).await;
    }
}

/// How often Redis is pinged with `REDIS_HEALTH_CHECK_ACTIVE_CONNECTION`.
const REDIS_HEALTH_EVERY: Duration = Duration::from_secs(1);

/// `REDIS_HEALTH_CHECK_ACTIVE_CONNECTION`: unhealthy while a Redis the
/// service sends to cannot be reached (a PING fails to connect, breaks or
/// times out), healthy again once every one answers. An error reply is an
/// answer: the connection is up.
pub async fn follow_redis(state: Arc<State>, health: Arc<Health>) {
    let mut up = true;
    loop {
        let backends = std::iter::once(&state.backend).chain(state.per_second.as_ref());
        let mut all = true;
        for b in backends {
            let r = tokio::time::timeout(state.settings.redis.timeout, b.ping()).await;
            let reached = match r {
                Ok(Ok(())) => true,
                Ok(Err(e)) => !crate::backend::unreachable(&e),
                Err(_) => false,
            };
            all &= reached;
        }
        if all != up {
            if all {
                log::warn("Redis answers again: healthy");
            } else {
                log::error("Redis cannot be reached: unhealthy until it answers");
            }
            up = all;
        }
        health.set(Part::Redis, all);
        tokio::time::sleep(REDIS_HEALTH_EVERY).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_part_can_make_it_unhealthy() {
        let h = Health::new(true);
        assert!(h.healthy());
        for part in [Part::Redis, Part::Config, Part::Module] {
            h.set(part, false);
            assert!(!h.healthy(), "{part:?}");
            h.set(part, true);
            assert!(h.healthy(), "{part:?}");
        }
        h.set(Part::Redis, false);
        h.set(Part::Module, false);
        h.set(Part::Redis, true);
        assert!(!h.healthy(), "the module is still missing");
    }

    #[test]
    fn unhealthy_until_a_config_when_asked_and_never_again_once_stopping() {
        let h = Health::new(false);
        let mut rx = h.subscribe();
        assert!(!h.healthy() && !*rx.borrow_and_update());
        h.set(Part::Config, true);
        assert!(rx.has_changed().unwrap() && *rx.borrow_and_update());
        h.set(Part::Config, true);
        assert!(!rx.has_changed().unwrap(), "no change, no notice");
        h.stop();
        assert!(!h.healthy() && !*rx.borrow_and_update());
        h.set(Part::Config, true);
        h.set(Part::Redis, true);
        assert!(!h.healthy());
    }
}
