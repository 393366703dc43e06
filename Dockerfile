# Multi-stage build of the release binary.
FROM rust:1.89-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY crates ./crates
# Cargo.toml names the criterion bench: without its file the manifest does not parse.
COPY benches ./benches
COPY demo ./demo
COPY config ./config
RUN cargo build --release --locked --bin retrieval-service

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates && rm -rf /var/lib/apt/lists/*
RUN useradd --system --uid 10001 retrieval
WORKDIR /app
COPY --from=build /src/target/release/retrieval-service /usr/local/bin/retrieval-service
COPY config ./config
USER retrieval
ENV RETR_HOST=0.0.0.0 RETR_PORT=8080
EXPOSE 8080
ENTRYPOINT ["retrieval-service"]
CMD ["serve"]
