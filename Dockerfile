# syntax=docker/dockerfile:1
# runpod-pool-controller: multi-stage, the package installed as a wheel, non-root.
# Builds for linux/amd64 and linux/arm64 alike: pure Python wheels, no architecture-specific
# step, so `docker buildx build --platform linux/amd64,linux/arm64 .` needs no emulation
# tricks beyond QEMU for pip (.github/workflows/release.yml).

FROM python:3.11.11-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY rpp ./rpp
# The package and every dependency as wheels; the runtime stage installs only these.
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11.11-slim-bookworm
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
COPY --from=build /wheels /wheels
# --no-index: only the wheels built above, nothing fetched at this stage.
RUN pip install --no-cache-dir --no-index --find-links=/wheels /wheels/runpod_pool_controller-*.whl \
    && rm -rf /wheels \
    && groupadd --system --gid 10001 rpp \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin rpp
# Numeric, so Kubernetes' runAsNonRoot can verify it without reading /etc/passwd.
USER 10001:10001
ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
EXPOSE 8080
# Other commands: docker run --entrypoint rpp IMAGE validate pool.yaml
ENTRYPOINT ["rpp", "run"]
