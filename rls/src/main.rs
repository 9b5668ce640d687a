//! `redis-cell-rls`: configured by the environment, as envoyproxy/ratelimit.

#[tokio::main]
async fn main() {
    let settings = match rls::settings::Settings::from_env() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("redis-cell-rls: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = rls::run(settings).await {
        eprintln!("redis-cell-rls: {e}");
        std::process::exit(1);
    }
}
