//! The v3 `RateLimitService`: turns a request into a plan, runs it on the
//! backend, and answers with the decisions. Thin: the rules live in
//! `config`, `plan` and `decide`.

use std::sync::{Arc, RwLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use envoy_types::pb::envoy::config::core::v3::HeaderValue;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    DescriptorStatus, RateLimit as PbRateLimit,
};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitService;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::Duration as PbDuration;
use tonic::{Request, Response, Status as GrpcStatus};

use crate::backend::Backend;
use crate::config::{Config, KeyValue, Override, Unit};
use crate::decide::{self, Check, Code, Status};
use crate::local_cache::{self, LocalCache};
use crate::log;
use crate::plan::{self, Charge, Mode};
use crate::settings::Settings;
use crate::stats::Stats;
use crate::trace;

/// The gRPC server span's name: the service and the method.
const GRPC_METHOD: &str = "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

pub struct State {
    pub settings: Settings,
    pub config: RwLock<Option<Arc<Config>>>,
    pub backend: Arc<Backend>,
    /// `REDIS_PERSECOND`: the backend of limits whose unit is a second.
    pub per_second: Option<Arc<Backend>>,
    pub stats: Stats,
    /// `LOCAL_CACHE_SIZE_IN_BYTES`: keys known to be over their limit
    /// until their window ends (`None`: no cache).
    pub local_cache: Option<LocalCache>,
    pub cluster: bool,
    /// Decisions running, in place or on their own tasks once their
    /// callers went away (see [`State::decide_detached`]), at most
    /// [`MAX_DETACHED`].
    pub detached: Arc<tokio::sync::Semaphore>,
    /// What the last module check found wrong, one sentence per server
    /// (empty: every server has the module the service needs; `None`
    /// before a check has answered).
    pub module_problems: RwLock<Option<Vec<String>>>,
    /// Wakes the module check at once (a call found a command unknown).
    pub module_recheck: tokio::sync::Notify,
}

/// How often the module is checked while every server has it, and while
/// one does not.
pub const MODULE_CHECK_EVERY: std::time::Duration = std::time::Duration::from_secs(10);
pub const MODULE_RECHECK_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// The most decisions that run at once. A client that gives up frees its
/// stream but not its decision: without a bound, clients that cancel each
/// request at once while Redis is slow would pile decisions up until
/// Redis answers or times out. A request past the bound waits for a
/// place (and can still be cancelled while it waits).
pub const MAX_DETACHED: usize = 16_384;

/// A failed call: the gRPC error and which stat counts it.
pub struct Failure {
    pub message: String,
    pub redis: bool,
}

impl State {
    pub fn current_config(&self) -> Option<Arc<Config>> {
        self.config
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// What is wrong with the servers' module, if anything: the calls'
    /// error and the health check's verdict.
    pub fn module_problem(&self) -> Option<String> {
        let p = self
            .module_problems
            .read()
            .unwrap_or_else(|e| e.into_inner());
        p.as_ref().filter(|p| !p.is_empty()).map(|p| p.join("; "))
    }

    /// The server a backend's errors name: `REDIS_URL`'s (or
    /// `REDIS_PERSECOND_URL`'s) address without credentials.
    fn server_of(&self, backend: &Backend) -> String {
        let s = match &self.settings.redis_per_second {
            Some(r) if !std::ptr::eq(backend, &*self.backend) => r,
            _ => &self.settings.redis,
        };
        match s.kind.as_str() {
            "SENTINEL" => format!(
                "the master '{}' of the sentinels",
                s.url.split(',').next().unwrap_or_default().trim()
            ),
            _ => s
                .url
                .split(',')
                .map(|u| crate::module::server_name(u.trim()))
                .collect::<Vec<_>>()
                .join(","),
        }
    }

    /// Checks that every server has the module (see
    /// [`Backend::check_module`]) and keeps what is wrong; a server that
    /// cannot be reached leaves the last verdict as it was. Logs each
    /// change: what to load and where, or that it is there again.
    pub async fn check_modules(&self) {
        let probe_key = format!("{}redis-cell-rls-probe", self.settings.cache_key_prefix);
        let mut problems = Vec::new();
        let mut found = Vec::new();
        let backends = std::iter::once(&self.backend).chain(self.per_second.as_ref());
        for backend in backends {
            let server = self.server_of(backend);
            // A server that does not answer in time is one that cannot be
            // reached (a start must not wait on it for longer).
            let checked = tokio::time::timeout(
                self.settings.redis.timeout,
                backend.check_module(&server, &probe_key),
            )
            .await
            .unwrap_or_else(|_| {
                Err((redis::ErrorKind::IoError, "the module check timed out").into())
            });
            match checked {
                Ok(servers) => {
                    for (name, f) in servers {
                        match crate::module::problem(&f, &name) {
                            Some(p) => problems.push(p),
                            None => found.push((name, f)),
                        }
                    }
                }
                Err(e) => {
                    log::debug(&format!("module check: {server}: {e}"));
                    return;
                }
            }
        }
        let mut current = self
            .module_problems
            .write()
            .unwrap_or_else(|e| e.into_inner());
        if current.as_ref() == Some(&problems) {
            return;
        }
        for p in &problems {
            log::error(&format!("redis-cell-rls cannot decide: {p}"));
        }
        if problems.is_empty() {
            for (name, f) in &found {
                let version = match f {
                    crate::module::Found::Ready { version: Some(v) } => {
                        crate::module::version_text(*v)
                    }
                    _ => "(found by the probe: MODULE LIST refused)".into(),
                };
                log::warn(&format!(
                    "Redis at {name} has {} {version}: calls are decided",
                    crate::module::NAME
                ));
            }
        }
        *current = Some(problems);
    }

    pub(crate) fn mode(&self) -> Mode {
        if self.settings.all_or_nothing || self.settings.stop_cache_key_increment_when_overlimit {
            Mode::AllOrNothing
        } else {
            Mode::Reference
        }
    }

    /// Decides one request so that a client that gives up (Envoy's
    /// deadline is 20 ms by default) or a server deadline never stops it
    /// halfway: between an all-or-nothing charge and the refund of a
    /// refused request, or between a charge and its stats. The decision
    /// runs in place and moves onto a task of its own only if its caller
    /// goes away first ([`crate::finish::Finish`]).
    pub async fn decide_detached(
        self: &Arc<Self>,
        req: RateLimitRequest,
    ) -> Result<RateLimitResponse, Failure> {
        // A place without waiting when there is one (most of the time).
        let place = match self.detached.clone().try_acquire_owned() {
            Ok(place) => place,
            Err(tokio::sync::TryAcquireError::Closed) => return Err(shutting_down()),
            Err(tokio::sync::TryAcquireError::NoPermits) => {
                match self.detached.clone().acquire_owned().await {
                    Ok(place) => place,
                    Err(_) => return Err(shutting_down()),
                }
            }
        };
        let st = self.clone();
        // Boxed where it is made: the decision's future is large (the
        // Redis client's futures inside), and each future that held it by
        // value copied all of it on every move (callgrind: about 16k
        // instructions a decision, rls/bench-instructions).
        let decision = Box::pin(async move {
            let r = st.should_rate_limit(&req).await;
            drop(place);
            r
        });
        // The caller's span stays the parent if the decision moves to a
        // task of its own.
        crate::finish::Finish::new(crate::trace::scope(crate::trace::current(), decision)).await
    }

    /// Decides one request (see [`State::decide_detached`]).
    pub async fn should_rate_limit(
        &self,
        req: &RateLimitRequest,
    ) -> Result<RateLimitResponse, Failure> {
        let service_err = |m: &str| Failure {
            message: m.to_string(),
            redis: false,
        };
        let mut span = trace::child("ShouldRateLimit Execution", trace::Scope::Service);
        if span.recording() {
            span.set_str("domain", req.domain.as_str());
            span.set_str("request string", trace::text::request(req));
        }
        if req.domain.is_empty() {
            return Err(service_err("rate limit domain must not be empty"));
        }
        if req.descriptors.is_empty() {
            return Err(service_err("rate limit descriptor list must not be empty"));
        }
        let Some(config) = self.current_config() else {
            return Err(service_err("no rate limit configuration loaded"));
        };
        if let Some(p) = self.module_problem() {
            return Err(Failure {
                message: format!("redis error: {p}"),
                redis: true,
            });
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        if !config.has_domain(&req.domain) {
            self.stats.add(
                &format!(
                    "ratelimit.service.rate_limit.{}.domain_not_found",
                    req.domain
                ),
                // Per descriptor, as the reference counts each lookup.
                req.descriptors.len() as u64,
            );
        }
        let matched = req
            .descriptors
            .iter()
            .map(|d| {
                let o = d.limit.as_ref().map(|l| Override {
                    requests_per_unit: l.requests_per_unit,
                    unit: l.unit,
                });
                config.get_limit(&req.domain, &d.entries, o)
            })
            .collect();
        let checks = decide::limits_to_check(matched);
        let hits: Vec<u64> = req
            .descriptors
            .iter()
            .map(|d| decide::hits(d.hits_addend.as_ref().map(|h| h.value), req.hits_addend))
            .collect();
        let mode = self.mode();
        let tag = (self.cluster && mode == Mode::AllOrNothing).then_some(req.domain.as_str());
        let mut charges = Vec::new();
        let mut per_second = Vec::new();
        // Descriptors the local cache answers OVER_LIMIT without Redis.
        let mut cached = Vec::new();
        for (i, check) in checks.iter().enumerate() {
            if let Check::Limit(l) = check {
                let key = plan::cache_key(
                    &self.settings.cache_key_prefix,
                    tag,
                    &req.domain,
                    &req.descriptors[i].entries,
                    l,
                    now,
                );
                let c = Charge {
                    index: i,
                    key,
                    limit: l.clone(),
                    hits: hits[i],
                    negative: req.descriptors[i].is_negative_hits,
                };
                if let Some(lc) = &self.local_cache {
                    if c.negative {
                        // Hits given back: the count may be under the limit again.
                        lc.remove(&c.key);
                    } else if local_cache::cacheable(l)
                        && lc.is_over(&c.key, l.requests_per_unit, c.hits, now)
                    {
                        cached.push(i);
                        continue;
                    }
                }
                if self.per_second.is_some() && l.unit == Some(Unit::Second) {
                    per_second.push(c);
                } else {
                    charges.push(c);
                }
            }
        }
        let per_second_backend = self.per_second.as_deref().unwrap_or(&self.backend);
        // Until the outcomes are read (the reference's spans the pipelines).
        let mut redis_span = trace::child("Redis Pipeline Execution", trace::Scope::Redis);
        if redis_span.recording() {
            let refused = mode == Mode::AllOrNothing
                && (plan::never_fits(&charges, mode) || plan::never_fits(&per_second, mode));
            redis_span.set_int("pipeline length", pipeline_length(&charges, mode, refused));
            redis_span.set_int(
                "perSecondPipeline length",
                pipeline_length(&per_second, mode, refused),
            );
        }
        let outcomes = match mode {
            // Without per-second charges, no join: it moved both calls'
            // results through its own slots on every request.
            Mode::Reference if per_second.is_empty() => {
                self.run(&self.backend, &charges, mode, false)
                    .await?
                    .outcomes
            }
            Mode::Reference => {
                let (main, fast) = futures_util::future::join(
                    self.run(&self.backend, &charges, mode, false),
                    self.run(per_second_backend, &per_second, mode, false),
                )
                .await;
                let mut outcomes = main?.outcomes;
                outcomes.extend(fast?.outcomes);
                outcomes
            }
            Mode::AllOrNothing => {
                // A descriptor over its limit refuses the request: the
                // others are only looked at.
                self.all_or_nothing(
                    &charges,
                    per_second_backend,
                    &per_second,
                    !cached.is_empty(),
                )
                .await?
            }
        };
        drop(redis_span);
        if let Some(lc) = &self.local_cache {
            let counting = mode == Mode::Reference;
            for (c, o) in charges.iter().chain(&per_second).zip(&outcomes) {
                if let Some(count) = local_cache::count_to_cache(&c.limit, o, c.hits, counting) {
                    let end = local_cache::window_end(&c.limit, now);
                    lc.insert(&c.key, c.limit.requests_per_unit, count, end, now);
                }
            }
        }
        let (mut statuses, mut deltas) = decide::statuses(
            &checks,
            &hits,
            &outcomes,
            self.settings.near_limit_ratio,
            now,
        );
        for &i in &cached {
            if let (Check::Limit(l), Some(slot)) = (&checks[i], statuses.get_mut(i)) {
                let (status, d) = decide::judge_cached(l, hits[i], now);
                *slot = status;
                deltas.push((i, d));
            }
        }
        for (i, d) in &deltas {
            if let Some(Check::Limit(l)) = checks.get(*i) {
                self.stats.add_limit(&l.full_key, d);
            }
        }
        let overall = decide::overall(
            &checks,
            &statuses,
            self.settings.quota_mode,
            self.settings.shadow_mode,
        );
        if overall.global_shadow_hit {
            self.stats.add("ratelimit.service.global_shadow_mode", 1);
        }
        let mut resp = RateLimitResponse {
            overall_code: pb_code(overall.code),
            statuses: statuses.iter().map(pb_status).collect(),
            ..Default::default()
        };
        if self.settings.response_dynamic_metadata {
            // As the reference: the configured metadata of the limits that
            // were checked and passed.
            let passed: Vec<_> = checks
                .iter()
                .zip(&statuses)
                .filter_map(|(c, s)| match c {
                    Check::Limit(l) if s.code != Code::OverLimit => l.metadata.as_deref(),
                    _ => None,
                })
                .collect();
            resp.dynamic_metadata = Some(crate::metadata::of_request(req, &passed));
        }
        if self.settings.limit_response_headers_enabled {
            if let Some(s) = overall.header_from.and_then(|i| statuses.get(i)) {
                if let Some((rpu, _, _)) = &s.current_limit {
                    let h = |k: &str, v: String| HeaderValue {
                        key: k.to_string(),
                        value: v,
                        ..Default::default()
                    };
                    resp.response_headers_to_add = vec![
                        h(&self.settings.header_limit, rpu.to_string()),
                        h(
                            &self.settings.header_remaining,
                            s.limit_remaining.to_string(),
                        ),
                        h(
                            &self.settings.header_reset,
                            s.duration_until_reset_secs.unwrap_or(0).to_string(),
                        ),
                    ];
                }
            }
        }
        Ok(resp)
    }

    async fn run(
        &self,
        backend: &Backend,
        charges: &[Charge],
        mode: Mode,
        refused: bool,
    ) -> Result<plan::Interpreted, Failure> {
        if charges.is_empty() {
            return Ok(plan::Interpreted::default());
        }
        let p = plan::plan_with(charges, mode, refused);
        let replies = backend
            .run(&p)
            .await
            .map_err(|e| self.redis_failure(backend, e))?;
        plan::interpret(&p, charges, &replies).map_err(bad_reply)
    }

    /// All-or-nothing over the main Redis and the per-second one: each
    /// charges its limiters in one transaction, both at once; when either
    /// refuses (or fails), what the other's allowed calls took is given
    /// back with the module's refunds, so a refused request leaves no
    /// charge on either. A request that can never fit, or that the local
    /// cache refuses (`refused`), is refused before Redis, everywhere.
    async fn all_or_nothing(
        &self,
        main: &[Charge],
        fast_backend: &Backend,
        fast: &[Charge],
        refused: bool,
    ) -> Result<Vec<plan::Outcome>, Failure> {
        let mode = Mode::AllOrNothing;
        let refused = refused || plan::never_fits(main, mode) || plan::never_fits(fast, mode);
        let (m, f) = if fast.is_empty() {
            // Without per-second charges, no join (as in the reference
            // mode: it moved both calls' futures on every request).
            let m = self.run(&self.backend, main, mode, refused).await;
            (m, Ok(plan::Interpreted::default()))
        } else {
            futures_util::future::join(
                self.run(&self.backend, main, mode, refused),
                self.run(fast_backend, fast, mode, refused),
            )
            .await
        };
        let (mut m, mut f) = match (m, f) {
            (Ok(m), Ok(f)) => (m, f),
            (Err(e), Ok(f)) => {
                let _ = Self::give_back(fast_backend, fast, &mut f.clone()).await;
                return Err(e);
            }
            (Ok(m), Err(e)) => {
                let _ = Self::give_back(&self.backend, main, &mut m.clone()).await;
                return Err(e);
            }
            (Err(e), Err(_)) => return Err(e),
        };
        if m.refused || f.refused {
            let (a, b) = futures_util::future::join(
                Self::give_back(&self.backend, main, &mut m),
                Self::give_back(fast_backend, fast, &mut f),
            )
            .await;
            a?;
            b?;
        }
        let mut outcomes = m.outcomes;
        outcomes.extend(f.outcomes);
        Ok(outcomes)
    }

    /// Refunds what a refused request's allowed calls took on `backend`,
    /// and reads the descriptors' outcomes from the state after it.
    async fn give_back(
        backend: &Backend,
        charges: &[Charge],
        done: &mut plan::Interpreted,
    ) -> Result<(), Failure> {
        if done.charged.is_empty() {
            return Ok(());
        }
        let p = plan::undo(charges, &done.charged);
        let replies = backend.run(&p).await.map_err(redis_failure)?;
        for (i, o) in plan::interpret_undo(&p, charges, &replies).map_err(bad_reply)? {
            if let Some(slot) = done.outcomes.get_mut(i) {
                *slot = o;
            }
        }
        done.charged.clear();
        Ok(())
    }
}

impl State {
    /// A Redis error as a call answers it; a command the server does not
    /// know means the module is gone (a server restarted without it):
    /// the error says what to load, and the check runs at once.
    fn redis_failure(&self, backend: &Backend, e: redis::RedisError) -> Failure {
        if e.to_string()
            .to_ascii_lowercase()
            .contains("unknown command")
        {
            self.module_recheck.notify_one();
            let server = self.server_of(backend);
            if let Some(p) = crate::module::problem(&crate::module::Found::Missing, &server) {
                return Failure {
                    message: format!("redis error: {p}"),
                    redis: true,
                };
            }
        }
        redis_failure(e)
    }
}

/// The commands of a pipeline, the Redis span's attributes (the
/// reference's count `INCRBY` and `EXPIRE` per key; here the module's
/// commands and peeks).
fn pipeline_length(charges: &[Charge], mode: Mode, refused: bool) -> i64 {
    if charges.is_empty() {
        return 0;
    }
    i64::try_from(plan::plan_with(charges, mode, refused).commands.len()).unwrap_or(i64::MAX)
}

fn shutting_down() -> Failure {
    Failure {
        message: "the service is shutting down".into(),
        redis: false,
    }
}

fn redis_failure(e: redis::RedisError) -> Failure {
    Failure {
        message: format!("redis error: {e}"),
        redis: true,
    }
}

fn bad_reply(e: plan::BadReply) -> Failure {
    Failure {
        message: format!("redis error: unexpected reply: {}", e.0),
        redis: true,
    }
}

/// A request's entries are matched and keyed where they are (no copy).
impl KeyValue for rate_limit_descriptor::Entry {
    fn key(&self) -> &str {
        &self.key
    }
    fn value(&self) -> &str {
        &self.value
    }
}

fn pb_code(c: Code) -> i32 {
    match c {
        Code::Ok => 1,
        Code::OverLimit => 2,
    }
}

fn pb_status(s: &Status) -> DescriptorStatus {
    DescriptorStatus {
        code: pb_code(s.code),
        current_limit: s
            .current_limit
            .as_ref()
            .map(|(rpu, unit, name)| PbRateLimit {
                name: name.clone(),
                requests_per_unit: *rpu,
                unit: unit.proto(),
            }),
        limit_remaining: s.limit_remaining,
        duration_until_reset: s.duration_until_reset_secs.map(|secs| PbDuration {
            seconds: i64::try_from(secs).unwrap_or(i64::MAX),
            nanos: 0,
        }),
        ..Default::default()
    }
}

/// The gRPC face of the service.
pub struct Grpc(pub Arc<State>);

#[tonic::async_trait]
impl RateLimitService for Grpc {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, GrpcStatus> {
        let start = Instant::now();
        let st = &self.0;
        let peer = request
            .extensions()
            .get::<crate::net::ConnInfo>()
            .and_then(|c| c.0.peer.get().copied());
        let mut span = trace::grpc_server(request.metadata(), GRPC_METHOD, peer);
        st.stats
            .add("ratelimit_server.ShouldRateLimit.total_requests", 1);
        let r = trace::scope(span.context(), st.decide_detached(request.into_inner())).await;
        match &r {
            Ok(_) => span.set_grpc_status(0, ""),
            Err(f) => span.set_grpc_status(2, &f.message),
        }
        st.stats.time(
            "ratelimit_server.ShouldRateLimit.response_time",
            start.elapsed().as_secs_f64(),
        );
        match r {
            Ok(resp) => Ok(Response::new(resp)),
            Err(f) => {
                let stat = if f.redis {
                    "redis_error"
                } else {
                    "service_error"
                };
                st.stats.add(
                    &format!("ratelimit.service.call.should_rate_limit.{stat}"),
                    1,
                );
                log::debug(&format!("ShouldRateLimit failed: {}", f.message));
                Err(GrpcStatus::unknown(f.message))
            }
        }
    }
}
