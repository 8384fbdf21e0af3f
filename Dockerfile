# The ncclguard image: one binary, `ncclguard`, for the controller Deployment and the probe
# DaemonSet (charts/ncclguard). Build with any OCI engine from the repository root:
#   docker build -t ncclguard:dev .        (or: podman build -t ncclguard:dev .)
# Debian 12 (bookworm) in both stages: the packages the project is developed and tested with.

# The runtime: the shared libraries ncclguard links (ldd), plus libfabric1: the probe loads
# libfabric at run time and falls back to Debian's when the node's /opt/amazon/efa is not mounted.
# A stage of its own, so that scripts/image.sh can put a binary built on the host into it
# (`--target runtime`) without compiling here; the last stage below adds the binary built in
# the build stage.
FROM debian:bookworm-slim AS runtime
RUN apt-get update -qq && \
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      ca-certificates libjemalloc2 libssl3 libyaml-cpp0.7 libcurl4 libspdlog1.10 libfmt9 \
      libcpprest2.10 libfabric1 libprometheus-cpp-core1.0 && \
    rm -rf /var/lib/apt/lists/*
LABEL org.opencontainers.image.title="ncclguard" \
      org.opencontainers.image.source="https://github.com/ncclguard/ncclguard"
# Non-root (the chart's controller runs as 65532 too; the probe DaemonSet runs as root only
# when privileged, see charts/ncclguard/values.yaml).
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/ncclguard"]

FROM debian:bookworm AS build
WORKDIR /src
# scripts/bootstrap.sh installs the build packages (the same list as on a development machine)
# and fetches the CUDA headers from NVIDIA's PyPI wheels (sha256-pinned) with pip. Only what it
# reads is copied first, so this layer is rebuilt only when the dependencies change.
COPY scripts/bootstrap.sh scripts/cuda-headers.sh scripts/
RUN scripts/bootstrap.sh --no-node && rm -rf /var/lib/apt/lists/*
COPY . .
# Only the `ncclguard` target: no tests, no benchmarks.
RUN NCCLGUARD_BUILD_DIR=/build scripts/build.sh ncclguard && \
    strip --strip-debug -o /ncclguard /build/cli/ncclguard

FROM runtime
COPY --from=build /ncclguard /usr/local/bin/ncclguard
# Fails the build when a library is missing, rather than the first pod.
RUN ! ldd /usr/local/bin/ncclguard | grep 'not found' && /usr/local/bin/ncclguard --help >/dev/null
