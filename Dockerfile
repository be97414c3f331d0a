# Build stage: Debian 12 with the -dev packages.
FROM debian:12 AS build
RUN apt-get update && apt-get install -y --no-install-recommends \
      build-essential cmake pkg-config libcurl4-gnutls-dev libmicrohttpd-dev \
      libjansson-dev libsqlite3-dev libseccomp-dev libgmp-dev libutf8proc-dev \
      uuid-dev nettle-dev libzstd-dev libcmocka-dev && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j"$(nproc)" \
      --target failproofai-sidecar failproofai-sandbox

# Runtime stage: only the shared libraries the binary needs.
FROM debian:12-slim
RUN apt-get update && apt-get install -y --no-install-recommends \
      libcurl3-gnutls libmicrohttpd12 libjansson4 libsqlite3-0 libseccomp2 libgmp10 \
      libutf8proc2 libuuid1 libnettle8 libzstd1 ca-certificates curl && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /var/lib/failproofai sidecar \
    && mkdir -p /var/lib/failproofai && chown sidecar /var/lib/failproofai
COPY --from=build /src/build/failproofai-sidecar /usr/local/bin/failproofai-sidecar
# The sandbox child image (static-pie), exec'd as the zygote that forks each
# evaluation's child, from beside the sidecar.
COPY --from=build /src/build/failproofai-sandbox /usr/local/bin/failproofai-sandbox
USER 10001
WORKDIR /var/lib/failproofai
ENV FAILPROOFAI_SIDECAR_DB=/var/lib/failproofai/sidecar.db \
    FAILPROOFAI_SIDECAR_LISTEN=127.0.0.1:8787
EXPOSE 8787
HEALTHCHECK --interval=10s --timeout=3s CMD curl -fsS http://127.0.0.1:8787/healthz || exit 1
ENTRYPOINT ["failproofai-sidecar", "run"]
