//! `redis-cell-rls`: configured by the environment, as envoyproxy/ratelimit.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    rls::main()
}
