# Build the module in Rust's Debian 12 (bookworm) image, run it on Debian
# 12's own redis-server (7.0.15), the server the tests run as "redis-7.0".
# scripts/docker-check runs these steps, in this order, on a fresh Debian
# 12 root (no Docker engine needed).
FROM rust:1-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends libclang-dev && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# .dockerignore keeps target/, .git and node_modules out of the context.
COPY . .
RUN cargo build --release --locked -p redis-cell

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends redis-server && rm -rf /var/lib/apt/lists/* && mkdir -p /data /usr/local/lib/redis/modules && chown redis:redis /data
COPY --from=build /src/target/release/libredis_cell.so /usr/local/lib/redis/modules/libredis_cell.so
# The default configuration; mount your own over it (it must keep the
# loadmodule line), or pass another path and options after the image name.
COPY docker/redis.conf /etc/redis/redis-cell.conf
WORKDIR /data
USER redis
EXPOSE 6379
ENTRYPOINT ["redis-server"]
CMD ["/etc/redis/redis-cell.conf"]
