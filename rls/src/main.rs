//! `redis-cell-rls`: configured by the environment, as envoyproxy/ratelimit.

fn main() {
    rls::main()
}
