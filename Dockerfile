# syntax=docker/dockerfile:1
# runpod-pool-controller: multi-stage, the package installed as a wheel, non-root.
# Builds for linux/amd64 and linux/arm64 alike (pure Python; no architecture-specific step).

FROM python:3.11.11-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY rpp ./rpp
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11.11-slim-bookworm
ARG VERSION=0.2.1
LABEL org.opencontainers.image.title="runpod-pool-controller" \
      org.opencontainers.image.description="Keeps a pool of RunPod GPU pods healthy behind an in-cluster nginx" \
      org.opencontainers.image.source="https://github.com/ownego/runpod-pool-controller" \
      org.opencontainers.image.licenses="MIT" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links=/wheels runpod-pool-controller \
    && rm -rf /wheels \
    && useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin rpp
USER 10001
ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
EXPOSE 8080
ENTRYPOINT ["rpp"]
CMD ["run"]
