# syntax=docker/dockerfile:1
# runpod-pool-controller: multi-stage, non-root. The build stage makes a virtualenv in
# /opt/rpp holding the runtime dependencies exactly as locked (requirements.lock: every
# file checked against its sha256) and the package itself (its wheel, --no-deps); the
# runtime stage copies that one directory, so no wheel or build tool is left in any layer.
# Both stages use the same base, pinned by digest (a tag can be pushed again; a digest
# cannot). Where the digest comes from: it is the one public Dockerfiles pin for
# python:3.11.11-slim-bookworm; it was NOT read from Docker Hub when it was written here (no
# registry access), so check it before a release with
# `docker buildx imagetools inspect python:3.11.11-slim-bookworm` (Dependabot moves it). Builds for linux/amd64 and linux/arm64 alike: the lock holds the hashes of every
# platform's wheels, and nothing here names an architecture.

FROM python:3.11.11-slim-bookworm@sha256:081075da77b2b55c23c088251026fb69a7b2bf92471e491ff5fd75c192fd38e5 AS build
WORKDIR /src
COPY requirements.lock ./
RUN python -m venv /opt/rpp \
    && /opt/rpp/bin/pip install --no-cache-dir --require-hashes -r requirements.lock
COPY pyproject.toml README.md LICENSE ./
COPY rpp ./rpp
# The package alone (its dependencies are the lock's), then pip checks nothing is missing.
RUN /opt/rpp/bin/pip wheel --no-cache-dir --no-deps --wheel-dir /tmp/dist . \
    && /opt/rpp/bin/pip install --no-cache-dir --no-deps /tmp/dist/runpod_pool_controller-*.whl \
    && /opt/rpp/bin/pip check

FROM python:3.11.11-slim-bookworm@sha256:081075da77b2b55c23c088251026fb69a7b2bf92471e491ff5fd75c192fd38e5
ARG VERSION=0.3.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="runpod-pool-controller" \
      org.opencontainers.image.description="Keeps a pool of RunPod GPU pods healthy behind an in-cluster nginx" \
      org.opencontainers.image.source="https://github.com/ownego/runpod-pool-controller" \
      org.opencontainers.image.url="https://github.com/ownego/runpod-pool-controller" \
      org.opencontainers.image.documentation="https://github.com/ownego/runpod-pool-controller/blob/main/docs/install.md" \
      org.opencontainers.image.vendor="ownego" \
      org.opencontainers.image.licenses="MIT" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
RUN groupadd --system --gid 10001 rpp \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin rpp
COPY --from=build /opt/rpp /opt/rpp
ENV PATH=/opt/rpp/bin:$PATH PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
# Numeric, so Kubernetes' runAsNonRoot can verify it without reading /etc/passwd.
USER 10001:10001
EXPOSE 8080 8081
# Other commands: docker run --entrypoint rpp IMAGE validate pool.yaml
ENTRYPOINT ["rpp", "run"]
