//! The first connection to Redis, retried as the reference retries it
//! (`REDIS_STARTUP_*`): exponential backoff with jitter from the initial
//! interval up to the maximum one, until Redis answers a PING or the
//! elapsed time runs out. A Redis that is not ready yet (a pod started
//! beside its server) then delays the start instead of stopping it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::Backend;
use crate::log;
use crate::settings::{RedisSettings, StartupRetry};

/// The wait before the retry after the `attempt`-th failure (0 for the
/// first), as the reference's backoff (jpillora/backoff, factor 2, jitter)
/// computes it: `initial * 2^attempt`, a random point between `initial`
/// and that, at most `max`. A zero initial interval is 100 ms and a zero
/// maximum 10 s, as there.
pub fn wait(r: &StartupRetry, attempt: u32, random: f64) -> Duration {
    let min = if r.initial_interval.is_zero() {
        Duration::from_millis(100)
    } else {
        r.initial_interval
    };
    let max = if r.max_interval.is_zero() {
        Duration::from_secs(10)
    } else {
        r.max_interval
    };
    if min >= max {
        return max;
    }
    let minf = min.as_secs_f64();
    let d = minf * 2f64.powf(f64::from(attempt));
    let d = random.clamp(0.0, 1.0) * (d - minf) + minf;
    if !d.is_finite() || d >= max.as_secs_f64() {
        return max;
    }
    Duration::from_secs_f64(d).max(min)
}

/// A duration as the log writes it, to the millisecond.
fn ms(d: Duration) -> String {
    format!("{:?}", Duration::from_millis(d.as_millis() as u64))
}

/// Connects to the Redis of `s` and checks it answers a PING, retrying
/// every failure but a configuration error until it does, or until
/// `retry.max_elapsed` (when not zero) has passed: the error then says
/// where, for how long, and the last failure.
pub async fn connect(s: &RedisSettings, retry: StartupRetry) -> Result<Arc<Backend>, String> {
    let server = s
        .url
        .split(',')
        .map(|u| crate::module::server_name(u.trim()))
        .collect::<Vec<_>>()
        .join(",");
    let start = Instant::now();
    let mut jitter = crate::xds::Jitter::new();
    let mut attempt = 0u32;
    loop {
        let try_once = async {
            let b = Backend::connect(s).await?;
            b.ping().await?;
            Ok::<_, redis::RedisError>(b)
        };
        // With a bound, an attempt (the Redis client retries a connection
        // on its own) takes no longer than the time left, or than
        // REDIS_TIMEOUT when less is left: the last attempt, made when the
        // time runs out, has as long as any call.
        let (outcome, bound) = if retry.max_elapsed.is_zero() {
            (Some(try_once.await), None)
        } else {
            let left = retry.max_elapsed.saturating_sub(start.elapsed());
            let bound = left.max(s.timeout);
            (
                tokio::time::timeout(bound, try_once).await.ok(),
                Some(bound),
            )
        };
        // Why the attempt failed.
        let why = match outcome {
            Some(Ok(b)) => return Ok(b),
            // A setting that cannot work (a certificate that cannot be
            // read, TLS options a cluster does not take) never will.
            Some(Err(e)) if e.kind() == redis::ErrorKind::InvalidClientConfig => {
                return Err(e.to_string())
            }
            Some(Err(e)) => e.to_string(),
            None => format!("no answer within {}", ms(bound.unwrap_or_default())),
        };
        let elapsed = start.elapsed();
        let left = retry.max_elapsed.checked_sub(elapsed);
        if !retry.max_elapsed.is_zero() && left.is_none_or(|l| l.is_zero()) {
            return Err(format!(
                "timed out waiting for Redis connection to {server} after {}: {why}",
                ms(elapsed)
            ));
        }
        let mut d = wait(&retry, attempt, jitter.next());
        attempt = attempt.saturating_add(1);
        // The last attempt is made when the time runs out, not after it.
        if let Some(left) = left.filter(|_| !retry.max_elapsed.is_zero()) {
            d = d.min(left);
        }
        log::warn(&format!(
            "Retrying Redis connection to {server} in {} (elapsed: {}): {why}",
            ms(d),
            ms(elapsed)
        ));
        tokio::time::sleep(d).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn retry(initial: u64, max: u64) -> StartupRetry {
        StartupRetry {
            initial_interval: Duration::from_millis(initial),
            max_interval: Duration::from_millis(max),
            max_elapsed: Duration::ZERO,
        }
    }

    #[test]
    fn waits_double_up_to_the_maximum() {
        let r = retry(1000, 30_000);
        // Without jitter's randomness (the top of each range).
        let top: Vec<u64> = (0..7)
            .map(|a| wait(&r, a, 1.0).as_millis() as u64)
            .collect();
        assert_eq!(top, [1000, 2000, 4000, 8000, 16_000, 30_000, 30_000]);
        // The bottom of every range is the initial interval.
        for a in 0..10 {
            assert_eq!(wait(&r, a, 0.0), Duration::from_secs(1));
        }
        assert_eq!(wait(&r, 1, 0.5), Duration::from_millis(1500));
        assert_eq!(wait(&r, u32::MAX, 0.5), Duration::from_secs(30));
    }

    #[test]
    fn zero_intervals_are_the_references_defaults() {
        let r = retry(0, 0);
        assert_eq!(wait(&r, 0, 0.3), Duration::from_millis(100));
        assert_eq!(wait(&r, 20, 1.0), Duration::from_secs(10));
        // An initial interval at or above the maximum: always the maximum.
        assert_eq!(wait(&retry(5000, 2000), 0, 0.0), Duration::from_secs(2));
    }
}
