"""The nginx beside `rpp nginx-reloader`: the slot files it includes, and its reloads.

Where it sits: an adapter (I/O only) under the reloader (rpp/commands/nginx_reloader.py),
which runs as a sidecar in the nginx pod. It does three things:

- **Writes the slot files all at once.** Each version of the slots ConfigMap goes into a
  new directory, and one symlink, `current`, is swapped to it with a rename, as the
  kubelet does for ConfigMap volumes: nginx, which includes
  `<dir>/current/{proxy,upstream,servers}.conf`, never sees half of one version and half
  of another, even if it restarts mid-write.
- **Adds a status server** to servers.conf, on 127.0.0.1 only: `/rpp-slots-version`
  answers the ConfigMap version nginx loaded, and every other path 503. That is how the
  reloader knows a reload took (nginx tests a new config on reload as `nginx -t` does,
  and keeps the old one when it fails), and the upstream of the placeholder files points
  at it, so nginx answers 503 cleanly before the controller has written any slots.
- **Signals the nginx master** with SIGHUP (`nginx -s reload`): a graceful reload, which
  lets in-flight requests and streams finish on the old workers. The master's pid comes
  from nginx's pid file, visible to the sidecar through a shared volume; the pod shares
  one process namespace (`shareProcessNamespace: true`) and both run as the same user.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx

CURRENT = "current"
FILES = ("proxy.conf", "upstream.conf", "servers.conf")
VERSION_PATH = "/rpp-slots-version"
NO_SLOTS = "none"  # the placeholder's version: nothing was written by the controller yet
_VERSION_FILE = ".version"
_LISTEN = re.compile(r"^(\s*)listen (\d+);$", re.MULTILINE)  # a slot port, every address
_KEEP = 3  # version directories kept: the current one and two before it


@dataclass(frozen=True)
class SlotFiles:
    """The slot files of one pool's nginx, in `root` (a volume nginx mounts too)."""

    root: Path
    upstream: str  # the upstream the static config proxies to (rpp_<pool>_slots)
    status_port: int
    bind: str | None = None  # slot ports listen on this address only (None: every one)

    @property
    def current(self) -> Path:
        return self.root / CURRENT

    def written_version(self) -> str | None:
        """The version the files hold now; None when there are none yet."""
        try:
            return (self.current / _VERSION_FILE).read_text().strip()
        except OSError:
            return None

    def write(self, version: str, data: Mapping[str, str]) -> str | None:
        """Make `data` (the three FILES) the current files; the version they replace is
        returned (None: there were none). ValueError when one of the three is missing:
        what to serve instead is the reloader's choice (rpp/controller/slots_reload.py)."""
        missing = [name for name in FILES if name not in data]
        if missing:
            raise ValueError(f"slots version {version} lacks {', '.join(sorted(missing))}")
        previous = self.written_version()
        files = {name: data[name] for name in FILES}
        servers = files["servers.conf"]
        if self.bind:
            servers = _LISTEN.sub(rf"\g<1>listen {self.bind}:\g<2>;", servers)
        files["servers.conf"] = servers.rstrip("\n") + "\n" + self._status(version)
        target = self._new_directory(version)
        for name, text in files.items():
            _write_synced(target / name, text)
        _write_synced(target / _VERSION_FILE, version + "\n")
        self._point_at(target)
        return previous

    def write_placeholders(self) -> None:
        """Files nginx can start with before anything else was written: every request 503."""
        self.write(NO_SLOTS, self.placeholders())

    def restore(self, version: str) -> bool:
        """Point `current` back at a version still on disk; False when it is gone."""
        for directory in sorted(self.root.glob(".v-*")):
            marker = directory / _VERSION_FILE
            if marker.is_file() and marker.read_text().strip() == version:
                self._point_at(directory)
                return True
        return False

    def _new_directory(self, version: str) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        stamp = f"{os.getpid()}-{next(_COUNTER)}"
        safe = "".join(c for c in version if c.isalnum())[:40] or "x"
        target = self.root / f".v-{_sequence(self.root):012d}-{safe}-{stamp}"
        target.mkdir()
        return target

    def _point_at(self, target: Path) -> None:
        link = self.root / f".{CURRENT}.tmp-{os.getpid()}"
        link.unlink(missing_ok=True)
        link.symlink_to(target.name)
        os.replace(link, self.current)  # atomic: nginx sees the old files or the new
        self._prune(keep=target)

    def _prune(self, *, keep: Path) -> None:
        versions = sorted(self.root.glob(".v-*"))
        for old in versions[:-_KEEP]:
            if old != keep:
                shutil.rmtree(old, ignore_errors=True)

    def placeholders(self) -> dict[str, str]:
        """The three files of no slots: the upstream is the status server, which answers 503."""
        note = "# No slots yet: written by rpp nginx-reloader until the controller writes them.\n"
        return {
            "proxy.conf": note,
            "upstream.conf": (
                f"{note}upstream {self.upstream} {{\n"
                f"    server 127.0.0.1:{self.status_port};  # answers 503\n}}\n"
            ),
            "servers.conf": note,
        }

    def _status(self, version: str) -> str:
        return (
            "# Added by rpp nginx-reloader: which slots nginx loaded, on 127.0.0.1 only.\n"
            "server {\n"
            f"    listen 127.0.0.1:{self.status_port};\n"
            "    access_log off;\n"
            f"    location = {VERSION_PATH} {{\n"
            f'        return 200 "{version}\\n";\n'
            "    }\n"
            "    location / {\n"
            "        return 503;\n"
            "    }\n"
            "}\n"
        )


_COUNTER = itertools.count(1)  # names this process's version directories apart


def _sequence(root: Path) -> int:
    """One more than the newest version directory's number: they sort by age."""
    numbers = [int(p.name.split("-")[1]) for p in root.glob(".v-*") if p.name.count("-") >= 2]
    return max(numbers, default=0) + 1


def _write_synced(path: Path, text: str) -> None:
    with path.open("w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())


@dataclass(frozen=True)
class NginxMaster:
    """The running nginx, found through its pid file and asked through its status server."""

    pid_file: Path
    status_port: int

    def pid(self) -> int | None:
        """The master's pid when nginx runs; None when it does not (yet)."""
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None  # a pid file left behind by an nginx that is gone
        except PermissionError:
            pass  # it runs, as another user: the reload itself will say so
        return pid

    def reload(self) -> int | None:
        """Ask the master for a graceful reload (SIGHUP); its pid, None when none runs.

        PermissionError when nginx runs as another user than this process.
        """
        pid = self.pid()
        if pid is not None:
            os.kill(pid, signal.SIGHUP)
        return pid

    async def loaded_version(self, client: httpx.AsyncClient) -> str | None:
        """The slots version nginx serves now; None when it does not answer."""
        try:
            answer = await client.get(
                f"http://127.0.0.1:{self.status_port}{VERSION_PATH}", timeout=1.0
            )
        except httpx.HTTPError:
            return None
        return answer.text.strip() if answer.status_code == 200 else None
