# Build the module in a Rust image, run it in the official Redis image.
FROM rust:1-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends libclang-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --release --locked

FROM redis:7.2-bookworm
COPY --from=build /src/target/release/libredis_cell.so /usr/local/lib/redis/modules/libredis_cell.so
EXPOSE 6379
CMD ["redis-server", "--loadmodule", "/usr/local/lib/redis/modules/libredis_cell.so"]
