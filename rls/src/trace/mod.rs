//! OTLP tracing with the reference's spans (envoyproxy/ratelimit: the
//! gRPC server span of `otelgrpc`'s interceptor in
//! `src/server/server_impl.go`, `ShouldRateLimit Execution` in
//! `src/service/ratelimit.go`, `Redis Pipeline Execution` in
//! `src/redis/fixed_cache_impl.go`, `NewJsonHandler Remaining Execution`
//! for `/json`), parented to the caller's `traceparent` (or B3), sampled
//! as the reference samples, and exported off the request path: a span
//! that ends goes into a bounded queue (dropped when it is full), and one
//! task sends batches to the collector (`export`).
//!
//! With `TRACING_ENABLED=false` nothing is set up and every call here is a
//! check of an unset `OnceLock`.

pub mod export;
pub mod pb;
pub mod propagation;
pub mod sampler;
pub mod settings;
pub mod text;

use std::cell::Cell;
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::{mpsc, oneshot};

pub use propagation::Remote;
pub use sampler::Sampler;
pub use settings::{Protocol, TraceSettings};

/// Who made a span: the instrumentation scope it is exported under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    /// The gRPC server span (the reference's comes from `otelgrpc`).
    Grpc,
    /// The reference's tracer `ratelimit` (`src/service`).
    Service,
    /// The reference's tracer `redis.fixedCacheImpl` (`src/redis`).
    Redis,
    /// The reference's tracer `ratelimit server` (`src/server`: `/json`).
    Server,
}

impl Scope {
    pub fn name(self) -> &'static str {
        match self {
            Scope::Grpc => "redis-cell-rls/grpc",
            Scope::Service => "ratelimit",
            Scope::Redis => "redis.fixedCacheImpl",
            Scope::Server => "ratelimit server",
        }
    }
}

/// A span that ended, on its way to the exporter.
pub struct Finished {
    pub scope: Scope,
    pub span: pb::Span,
}

/// The span a request runs in: its children's parent.
#[derive(Clone, Debug)]
pub struct Context {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub sampled: bool,
    /// The caller's `tracestate`, when it sent one.
    pub trace_state: Option<Arc<str>>,
}

pub struct Tracer {
    sampler: Sampler,
    value_limit: Option<usize>,
    queue: mpsc::Sender<Finished>,
    /// Spans dropped because the queue was full.
    pub dropped: AtomicU64,
    flush: mpsc::Sender<oneshot::Sender<()>>,
}

static TRACER: OnceLock<Tracer> = OnceLock::new();

tokio::task_local! {
    static CURRENT: Context;
}

/// Starts tracing (the exporter's task on the current runtime), once.
pub fn init(s: &TraceSettings) {
    if !s.enabled || TRACER.get().is_some() {
        return;
    }
    for w in &s.warnings {
        crate::log::warn(&format!("tracing: {w}"));
    }
    let (queue, rx) = mpsc::channel(s.batch.max_queue);
    let (flush, flush_rx) = mpsc::channel(1);
    let instance = if s.service_instance_id.is_empty() {
        uuid_v4()
    } else {
        s.service_instance_id.clone()
    };
    let exporter = export::Exporter::new(s, &instance);
    crate::log::info(&format!(
        "tracing: OTLP over {} to {}, service {} (namespace '{}', instance {instance}), sampling rate {}",
        match s.protocol {
            Protocol::Http => "HTTP",
            Protocol::Grpc => "gRPC",
        },
        exporter.target(),
        s.service_name,
        s.service_namespace,
        s.sampling_rate
    ));
    let tracer = Tracer {
        sampler: Sampler::new(s.sampling_rate),
        value_limit: s.attribute_value_length_limit,
        queue,
        dropped: AtomicU64::new(0),
        flush,
    };
    if TRACER.set(tracer).is_ok() {
        tokio::spawn(exporter.run(rx, flush_rx, s.batch.clone()));
    }
}

/// Exports what is queued, waiting at most `timeout` (at shutdown, as
/// the reference flushes its provider for up to 5 s).
pub async fn shutdown(timeout: Duration) {
    let Some(t) = TRACER.get() else { return };
    let (done, wait) = oneshot::channel();
    let flushed = async {
        if t.flush.send(done).await.is_ok() {
            let _ = wait.await;
        }
    };
    let _ = tokio::time::timeout(timeout, flushed).await;
}

pub fn enabled() -> bool {
    TRACER.get().is_some()
}

/// The span the current task runs in, if any.
pub fn current() -> Option<Context> {
    if !enabled() {
        return None;
    }
    CURRENT.try_with(Context::clone).ok()
}

/// Runs `f` with `ctx` as its spans' parent.
pub async fn scope<F: Future>(ctx: Option<Context>, f: F) -> F::Output {
    match ctx {
        Some(c) => CURRENT.scope(c, f).await,
        None => f.await,
    }
}

/// A span in progress; it ends (and is queued for export, when sampled)
/// when dropped.
pub struct Span {
    ctx: Option<Context>,
    data: Option<Box<pb::Span>>,
    scope: Scope,
    /// The gRPC status to record if the span ends without one (its
    /// request was cancelled).
    grpc_code_unset: bool,
}

impl Span {
    fn noop() -> Span {
        Span {
            ctx: None,
            data: None,
            scope: Scope::Service,
            grpc_code_unset: false,
        }
    }

    /// Whether the span is sampled: its attributes are worth computing.
    pub fn recording(&self) -> bool {
        self.data.is_some()
    }

    pub fn context(&self) -> Option<Context> {
        self.ctx.clone()
    }

    pub fn set_str(&mut self, key: &str, v: impl Into<String>) {
        if let Some(d) = &mut self.data {
            let mut v = v.into();
            if let Some(limit) = TRACER.get().and_then(|t| t.value_limit) {
                truncate(&mut v, limit);
            }
            d.attributes.push(pb::KeyValue::string(key, v));
        }
    }

    pub fn set_int(&mut self, key: &str, v: i64) {
        if let Some(d) = &mut self.data {
            d.attributes.push(pb::KeyValue::int(key, v));
        }
    }

    /// The gRPC status code, and the span's error status for the codes
    /// `otelgrpc` counts as server errors.
    pub fn set_grpc_status(&mut self, code: i32, message: &str) {
        self.grpc_code_unset = false;
        self.set_int("rpc.grpc.status_code", i64::from(code));
        // Unknown, DeadlineExceeded, Unimplemented, Internal, Unavailable,
        // DataLoss (otelgrpc's serverStatus).
        if matches!(code, 2 | 4 | 12 | 13 | 14 | 15) {
            if let Some(d) = &mut self.data {
                d.status = Some(pb::Status {
                    message: message.to_string(),
                    code: pb::STATUS_ERROR,
                });
            }
        }
    }
}

impl Drop for Span {
    fn drop(&mut self) {
        if self.grpc_code_unset {
            // Dropped before it answered: its client went away.
            self.set_grpc_status(1, "");
        }
        let (Some(mut span), Some(t)) = (self.data.take(), TRACER.get()) else {
            return;
        };
        span.end_time_unix_nano = now_nanos();
        let f = Finished {
            scope: self.scope,
            span: *span,
        };
        if t.queue.try_send(f).is_err() {
            t.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn start(name: &str, scope: Scope, kind: i32, parent: Option<&Context>, remote: bool) -> Span {
    let Some(t) = TRACER.get() else {
        return Span::noop();
    };
    let trace_id = parent.map(|p| p.trace_id).unwrap_or_else(|| {
        let mut id = [0u8; 16];
        id[..8].copy_from_slice(&random_nonzero().to_be_bytes());
        id[8..].copy_from_slice(&random_nonzero().to_be_bytes());
        id
    });
    let span_id = random_nonzero().to_be_bytes();
    let sampled = t.sampler.sampled(parent.map(|p| p.sampled), &trace_id);
    let trace_state = parent.and_then(|p| p.trace_state.clone());
    let data = sampled.then(|| {
        let mut flags = pb::FLAG_SAMPLED | pb::FLAG_HAS_IS_REMOTE;
        if remote {
            flags |= pb::FLAG_IS_REMOTE;
        }
        Box::new(pb::Span {
            trace_id: trace_id.to_vec(),
            span_id: span_id.to_vec(),
            trace_state: trace_state.as_deref().unwrap_or_default().to_string(),
            parent_span_id: parent.map(|p| p.span_id.to_vec()).unwrap_or_default(),
            name: name.to_string(),
            kind,
            start_time_unix_nano: now_nanos(),
            flags,
            ..Default::default()
        })
    });
    Span {
        ctx: Some(Context {
            trace_id,
            span_id,
            sampled,
            trace_state,
        }),
        data,
        scope,
        grpc_code_unset: false,
    }
}

/// An internal span under the current task's span (a trace of its own
/// when there is none, as the reference's `/json` spans are).
pub fn child(name: &str, scope: Scope) -> Span {
    if !enabled() {
        return Span::noop();
    }
    start(name, scope, pb::KIND_INTERNAL, current().as_ref(), false)
}

/// The server span of a gRPC call, as `otelgrpc`'s interceptor makes it:
/// named after the method (`package.Service/Method`), parented to the
/// caller's context from the metadata.
pub fn grpc_server(
    metadata: &tonic::metadata::MetadataMap,
    full_method: &str,
    peer: Option<SocketAddr>,
) -> Span {
    if !enabled() {
        return Span::noop();
    }
    let remote = propagation::extract(|k| metadata.get(k).and_then(|v| v.to_str().ok()));
    let parent = remote.map(|r| Context {
        trace_id: r.trace_id,
        span_id: r.span_id,
        sampled: r.sampled,
        trace_state: (!r.trace_state.is_empty()).then(|| Arc::from(r.trace_state)),
    });
    let mut span = start(
        full_method,
        Scope::Grpc,
        pb::KIND_SERVER,
        parent.as_ref(),
        parent.is_some(),
    );
    if span.recording() {
        let (service, method) = full_method.rsplit_once('/').unwrap_or((full_method, ""));
        span.set_str("rpc.system", "grpc");
        span.set_str("rpc.service", service);
        span.set_str("rpc.method", method);
        if let Some(p) = peer {
            span.set_str("net.sock.peer.addr", p.ip().to_string());
            span.set_int("net.sock.peer.port", i64::from(p.port()));
        }
    }
    span.grpc_code_unset = true;
    span
}

/// Cuts `s` to at most `limit` bytes, on a character boundary.
fn truncate(s: &mut String, limit: usize) {
    if s.len() > limit {
        let mut end = limit;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
}

fn now_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

thread_local! {
    static RNG: Cell<u64> = Cell::new({
        // A random seed per thread (std's hasher keys are random).
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(now_nanos());
        h.finish()
    });
}

/// splitmix64 over a per-thread random seed: ids spread evenly (the
/// sampler reads them as numbers), never zero (an invalid id).
fn random_nonzero() -> u64 {
    RNG.with(|s| loop {
        let x = s.get().wrapping_add(0x9e37_79b9_7f4a_7c15);
        s.set(x);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        if z != 0 {
            return z;
        }
    })
}

/// A random (version 4) UUID, the reference's instance id by default.
fn uuid_v4() -> String {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&random_nonzero().to_be_bytes());
    b[8..].copy_from_slice(&random_nonzero().to_be_bytes());
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_values_are_cut_on_a_character_boundary() {
        let mut s = "aé".repeat(3);
        truncate(&mut s, 5);
        assert_eq!(s, "aéa");
        let mut s = "aé".to_string();
        truncate(&mut s, 2);
        assert_eq!(s, "a");
        let mut s = "short".to_string();
        truncate(&mut s, 4096);
        assert_eq!(s, "short");
    }

    #[test]
    fn uuids_are_version_4() {
        let u = uuid_v4();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
        assert!("89ab".contains(&u[19..20]), "{u}");
        assert_ne!(u, uuid_v4());
    }

    #[test]
    fn without_init_spans_are_free_and_inert() {
        let mut s = child("x", Scope::Service);
        assert!(!s.recording());
        assert!(s.context().is_none());
        s.set_str("k", "v");
        assert!(current().is_none());
    }
}
