//! Rate-limit HTTP requests from Rust (redis-rs) with redis-cell.
//!
//! Usage: `REDIS_URL=redis://localhost:6379 cargo run --example rust_headers`
//! Prints the HTTP status and headers the application would send.

/// The HTTP answer for one request: status and headers.
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
}

/// One request of `user`: 15 requests per minute, bursts of up to 16.
pub fn throttle(con: &mut redis::Connection, user: &str) -> redis::RedisResult<Answer> {
    let (limited, limit, remaining, retry_after, reset_after): (i64, i64, i64, i64, i64) =
        redis::cmd("CL.THROTTLE")
            .arg(format!("rl:{user}"))
            .arg(15)
            .arg(15)
            .arg(60)
            .arg(1)
            .query(con)?;
    let mut headers = vec![
        ("RateLimit-Limit", limit.to_string()),
        ("RateLimit-Remaining", remaining.to_string()),
        ("RateLimit-Reset", reset_after.to_string()),
    ];
    let status = if limited == 1 {
        headers.push(("Retry-After", retry_after.to_string()));
        429
    } else {
        200
    };
    Ok(Answer { status, headers })
}

/// Two limits at once, all or nothing: 5 per second (bursts of 5) and 8
/// per calendar day (UTC). Durations come in milliseconds (`MS`) and are
/// rounded up to whole seconds for the headers; the last field of the reply
/// says which limit bound.
pub fn throttle_tiered(con: &mut redis::Connection, user: &str) -> redis::RedisResult<Answer> {
    let (limited, limit, remaining, retry_ms, reset_ms, index): (i64, i64, i64, i64, i64, i64) =
        redis::cmd("CL.THROTTLEALL")
            .arg(2)
            .arg(format!("{{rl:{user}}}:sec"))
            .arg(format!("{{rl:{user}}}:day"))
            .arg(&["GCRA", "4", "5", "1"])
            .arg(&["FW", "8", "86400", "ALIGN"])
            .arg("MS")
            .query(con)?;
    let seconds = |ms: i64| ((ms + 999) / 1000).to_string();
    let policy = if index == 1 { "5;w=1" } else { "8;w=86400" };
    let mut headers = vec![
        ("RateLimit-Limit", limit.to_string()),
        ("RateLimit-Remaining", remaining.to_string()),
        ("RateLimit-Reset", seconds(reset_ms)),
        ("RateLimit-Policy", policy.to_string()),
    ];
    let status = if limited == 1 {
        if retry_ms >= 0 {
            headers.push(("Retry-After", seconds(retry_ms)));
        }
        429
    } else {
        200
    };
    Ok(Answer { status, headers })
}

/// Waits for a slot of `api` (100 calls per second, no burst, at most 1 s
/// of waiting), then calls it: the milliseconds waited and the result, or
/// `None` when no slot comes within a second.
pub fn call_when_allowed<T>(
    con: &mut redis::Connection,
    api: &str,
    call: impl FnOnce() -> T,
) -> redis::RedisResult<Option<(i64, T)>> {
    let (limited, _limit, _remaining, wait_ms, _reset): (i64, i64, i64, i64, i64) =
        redis::cmd("CL.RESERVE")
            .arg(format!("rl:api:{api}"))
            .arg(&[0, 100, 1])
            .arg("MAXWAIT")
            .arg(1)
            .arg("MS")
            .query(con)?;
    if limited == 1 {
        return Ok(None);
    }
    let waited = wait_ms.max(0);
    std::thread::sleep(std::time::Duration::from_millis(waited as u64));
    Ok(Some((waited, call())))
}

#[allow(dead_code)]
fn main() -> redis::RedisResult<()> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://localhost:6379".into());
    let mut con = redis::Client::open(url)?.get_connection()?;
    for _ in 0..18 {
        let answer = throttle(&mut con, "user123")?;
        let headers: Vec<String> = answer
            .headers
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        println!("{} {}", answer.status, headers.join(" "));
    }
    Ok(())
}
