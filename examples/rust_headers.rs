//! Rate-limit an HTTP request with CL.THROTTLE from Rust (redis-rs).
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
