"""The nginx reloader's loop: each slots ConfigMap change reaches nginx in about a second.

Where it sits: `rpp nginx-reloader` (rpp/commands/nginx_reloader.py) runs it in a sidecar
of every nginx pod, from the controller's image. The controller writes the slots
ConfigMap (act); this loop makes nginx serve it. Why not a ConfigMap volume and a
restart on change (Stakater Reloader): the kubelet updates a mounted ConfigMap up to
about a minute late, and a replacement is two slot changes, so nginx would restart twice
per replaced pod, cutting every stream longer than its grace period. A graceful reload
in place cuts nothing: the old workers finish what they serve.

For each version of the ConfigMap (watched through the API, its one name; changes that
come quicker than nginx reloads are coalesced into the newest):

1. its three files become the current files (rpp/adapters/nginx.py: all at once); a
   version without all three gets the placeholders instead, and nginx answers 503;
2. the nginx master gets SIGHUP, a graceful reload;
3. nginx must answer the new version on its status server within `reload_timeout_s`.
   It tests a new config on reload exactly as `nginx -t` does and keeps running the old
   one when the test fails; then the files go back to what nginx runs, and the rejection
   is reported: a log line, a Warning Event NginxConfigRejected on the ConfigMap, and
   runpod_pool_nginx_config_rejected at 1 until a version loads.

Every `check_every_s` it also compares what nginx serves with the files, and reloads
when they differ: nginx restarted, or the first version came before nginx ran.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncGenerator, Mapping
from typing import Any, Protocol

import httpx
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from tenacity import AsyncRetrying, retry_if_exception_type, wait_exponential_jitter

from rpp.adapters.clock import Clock
from rpp.adapters.kube.api import ConfigMapEvent, EventType, KubeError, StoredConfigMap
from rpp.adapters.logs import layer_logger
from rpp.adapters.nginx import FILES, NginxMaster, SlotFiles
from rpp.model import metric_names as names

log = layer_logger("rpp.controller")
REJECTED = "NginxConfigRejected"


class ConfigMapSource(Protocol):
    """What the loop needs of the cluster (rpp.adapters.kube.real.RealKubeApi has it)."""

    async def read_config_map(self, name: str) -> StoredConfigMap | None: ...

    def watch_config_map(self, name: str) -> AsyncGenerator[ConfigMapEvent, None]: ...

    async def emit_event(
        self,
        pool: Mapping[str, Any],
        *,
        type_: EventType,
        reason: str,
        message: str,
        now: dt.datetime,
    ) -> None: ...


class ReloaderMetrics:
    """The reloader's series, registered in its own registry (its /metrics)."""

    def __init__(self, registry: CollectorRegistry, *, config_map: str) -> None:
        def spec(name: str) -> names.MetricSpec:
            return names.BY_NAME[name]

        reloads = spec(names.NGINX_RELOADS_TOTAL)
        rejected = spec(names.NGINX_CONFIG_REJECTED)
        seconds = spec(names.NGINX_RELOAD_SECONDS)
        # prometheus_client adds `_total` to a counter's name itself.
        self.reloads = Counter(
            reloads.name.removesuffix("_total"),
            reloads.help,
            reloads.labels,
            registry=registry,
        )
        self.rejected = Gauge(rejected.name, rejected.help, rejected.labels, registry=registry)
        self.seconds = Histogram(
            seconds.name,
            seconds.help,
            seconds.labels,
            buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0),
            registry=registry,
        )
        self.config_map = config_map
        self.rejected.labels(config_map).set(0)

    def reloaded(self, seconds: float | None) -> None:
        self.reloads.labels(self.config_map, "ok").inc()
        self.rejected.labels(self.config_map).set(0)
        if seconds is not None:
            self.seconds.labels(self.config_map).observe(seconds)

    def failed(self, outcome: str) -> None:
        self.reloads.labels(self.config_map, outcome).inc()
        if outcome == "rejected":
            self.rejected.labels(self.config_map).set(1)


class ReloaderDied(RuntimeError):
    """A part of the reloader's loop ended, its error as the cause: nothing would apply
    the slots any more."""

    def __init__(self, part: str, error: BaseException | None) -> None:
        what = "ended" if error is None else f"stopped: {type(error).__name__}: {error}"
        super().__init__(f"{part} {what}")
        self.__cause__ = error


class SlotsReloader:
    """Keeps one nginx serving one slots ConfigMap."""

    def __init__(
        self,
        *,
        kube: ConfigMapSource,
        config_map: str,
        files: SlotFiles,
        nginx: NginxMaster,
        metrics: ReloaderMetrics,
        clock: Clock,
        reload_timeout_s: float = 10.0,
        check_every_s: float = 5.0,
    ) -> None:
        self._kube = kube
        self._name = config_map
        self._files = files
        self._nginx = nginx
        self._metrics = metrics
        self._clock = clock
        self._timeout_s = reload_timeout_s
        self._check_every_s = check_every_s
        self._latest: StoredConfigMap | None = None
        self._attempted: str | None = None  # the version last written (a rejected one too)
        self._seen_at = 0.0  # loop time the latest version was seen
        self._changed = asyncio.Event()
        self._http = httpx.AsyncClient()

    async def run(self, stop: asyncio.Event) -> None:
        """Watch and apply until `stop` is set; `ReloaderDied` when either part ends
        first (the process exits so the kubelet restarts it, rather than run on idle)."""
        if self._files.written_version() is None:
            self._files.write_placeholders()
        self._attempted = self._files.written_version()
        parts = {
            asyncio.create_task(self._watch()): "the slots watch",
            asyncio.create_task(self._apply_loop()): "the slots writer",
        }
        every: list[asyncio.Task[Any]] = [*parts, asyncio.create_task(stop.wait())]
        try:
            await asyncio.wait(every, return_when=asyncio.FIRST_COMPLETED)
            for task, part in parts.items():
                if task.done():
                    raise ReloaderDied(part, None if task.cancelled() else task.exception())
        finally:
            for each in every:
                each.cancel()
            await asyncio.gather(*every, return_exceptions=True)
            await self._http.aclose()

    async def _watch(self) -> None:
        # The adapter's watch resumes by itself, through bookmarks and a 410 Gone, and
        # waits out an API server's passing refusals; this retries what lasts (the API
        # server gone, RBAC missing), forever, with a jittered backoff up to 30 s.
        retrying = AsyncRetrying(
            wait=wait_exponential_jitter(initial=1, max=30),
            retry=retry_if_exception_type(KubeError),
            before_sleep=lambda state: log.warning(
                "slots ConfigMap %s: %s; retrying",
                self._name,
                state.outcome.exception() if state.outcome else "?",
            ),
        )
        async for attempt in retrying:
            with attempt:
                current = await self._kube.read_config_map(self._name)
                if current is not None:
                    self._offer(current)
                async for event in self._kube.watch_config_map(self._name):
                    if event.type == "DELETED":
                        log.warning(
                            "slots ConfigMap %s was deleted; nginx keeps serving its slots",
                            self._name,
                        )
                    else:
                        self._offer(event.config_map)

    def _offer(self, config_map: StoredConfigMap) -> None:
        latest = self._latest
        if latest is not None and latest.resource_version == config_map.resource_version:
            return
        self._latest = config_map
        self._seen_at = asyncio.get_running_loop().time()
        self._changed.set()

    async def _apply_loop(self) -> None:
        while True:
            try:
                async with asyncio.timeout(self._check_every_s):
                    await self._changed.wait()
            except TimeoutError:
                pass
            self._changed.clear()
            latest = self._latest
            if latest is not None and latest.resource_version != self._attempted:
                self._attempted = latest.resource_version  # a rejected one is not retried
                await self._apply(latest)
            else:
                await self._check()

    async def _apply(self, config_map: StoredConfigMap) -> None:
        version = config_map.resource_version
        data = config_map.data
        missing = [name for name in FILES if name not in data]
        if missing:
            # An empty or hand-edited ConfigMap: no slots rather than half of some, so
            # nginx answers 503 cleanly until the controller writes the three files again.
            log.warning(
                "slots ConfigMap %s version %s lacks %s: writing the placeholders (503)",
                self._name,
                version,
                ", ".join(missing),
            )
            data = self._files.placeholders()
        previous = self._files.write(version, data)
        log.info("slots ConfigMap %s: version %s written for nginx", self._name, version)
        await self._reload(version, previous=previous, subject=config_map, since=self._seen_at)

    async def _check(self) -> None:
        """Reload when nginx serves other slots than the files hold (it restarted, or it
        was not running when they were written)."""
        written = self._files.written_version()
        loaded = await self._nginx.loaded_version(self._http)
        if written is None or loaded is None or loaded == written:
            return
        log.info("nginx serves slots %s, the files hold %s: reloading", loaded, written)
        await self._reload(written, previous=loaded, subject=self._latest, since=None)

    async def _reload(
        self,
        version: str,
        *,
        previous: str | None,
        subject: StoredConfigMap | None,
        since: float | None,
    ) -> None:
        try:
            pid = self._nginx.reload()
        except OSError as error:
            log.error(
                "cannot signal nginx (pid file %s): %s; run the reloader as nginx's user in "
                "a pod with shareProcessNamespace: true",
                self._nginx.pid_file,
                error,
            )
            self._metrics.failed("error")
            return
        if pid is None:
            log.info("nginx is not running yet: it loads slots %s when it starts", version)
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout_s
        while loop.time() < deadline:
            if await self._nginx.loaded_version(self._http) == version:
                seconds = None if since is None else loop.time() - since
                self._metrics.reloaded(seconds)
                log.info(
                    "nginx serves slots %s%s",
                    version,
                    "" if seconds is None else f", {seconds:.2f}s after the change",
                )
                return
            await asyncio.sleep(0.02)
        await self._rejected(version, previous=previous, subject=subject)

    async def _rejected(
        self, version: str, *, previous: str | None, subject: StoredConfigMap | None
    ) -> None:
        loaded = await self._nginx.loaded_version(self._http)
        kept = loaded or previous
        if kept is not None:
            self._files.restore(kept)  # what nginx runs, so a restart loads it too
        message = (
            f"nginx did not load the slots of ConfigMap {self._name} version {version} "
            f"within {self._timeout_s:g}s: it rejected them (its log says why) and keeps "
            f"serving version {kept or 'unknown'}"
        )
        log.warning("%s", message)
        if subject is not None:
            await self._report(subject, message)
        # Last: once the gauge shows the rejection, its log line and Event exist too.
        self._metrics.failed("rejected")

    async def _report(self, subject: StoredConfigMap, message: str) -> None:
        try:
            await self._kube.emit_event(
                subject.as_event_subject(),
                type_="Warning",
                reason=REJECTED,
                message=message,
                now=self._clock.now(),
            )
        except KubeError as error:
            log.warning("could not record the Event %s: %s", REJECTED, error)
