"""The controller's own RunPod key, read again at the start of every loop when it is a file.

Where it sits: the process around observe -> decide -> act, first thing in each loop
(rpp/controller/loop.py calls `refresh`, then names the key's source to the shared RunPod
read, rpp/observe/shared.py, so a refused key is named in every pool's status).

With RUNPOD_API_KEY_FILE (the controller's Secret mounted as a volume), a rotated key
reaches the controller without a restart. Kubernetes updates a mounted Secret by writing
the new files beside the old and swapping the `..data` symlink, so `refresh` opens the
path anew each loop rather than keeping a file open. A changed key goes to the process's
redactor first (which keeps scrubbing the old key too: a log line or an answer in flight
may still quote it), then to the RunPod client (its Authorization header and the keys it
scrubs from RunPod's answers); one log line says the key changed and where it came from,
never what it is.

A file that cannot be used mid-run (gone, unreadable, not a key) does not stop the
controller: it keeps the last good key, says so in one warning (again only when what is
wrong changes, and once more when the file reads again), and the key's source carries the
problem, so a pool whose listing RunPod then refuses says why the key was not replaced
(NotActing RunPodKeyRefused, rpp/decide/pool.py).

With RUNPOD_API_KEY the key is the one read at start and `refresh` does nothing: rotating
it takes a restart.
"""

from __future__ import annotations

from rpp.adapters.logs import layer_logger
from rpp.adapters.redaction import Redactor
from rpp.adapters.runpod.client import RunPodClient
from rpp.controller.config import (
    KEY_FILE_VARIABLE,
    KEY_VARIABLE,
    ConfigError,
    read_api_key_file,
)
from rpp.model.observations import RunPodKeySource

log = layer_logger("rpp.controller")

FROM_ENVIRONMENT = RunPodKeySource(variable=KEY_VARIABLE)
"""The source of a key given in RUNPOD_API_KEY: read once, at start."""


class ControllerKey:
    """The key the controller's RunPod client sends, and where it comes from."""

    def __init__(
        self, *, key: str, path: str | None, runpod: RunPodClient, redactor: Redactor
    ) -> None:
        self._key = key
        self._path = path
        self._runpod = runpod
        self._redactor = redactor
        self._unreadable: str | None = None
        self._seen: tuple[str, ...] = (key,)

    @property
    def source(self) -> RunPodKeySource:
        """Which key this is, for a condition: never its value."""
        if self._path is None:
            return FROM_ENVIRONMENT
        return RunPodKeySource(
            variable=KEY_FILE_VARIABLE, path=self._path, unreadable=self._unreadable
        )

    @property
    def seen(self) -> tuple[str, ...]:
        """Every key this process has sent, the current one last: all stay secret."""
        return self._seen

    def refresh(self) -> None:
        """Read the key file again; a changed key is sent from the next RunPod call on."""
        if self._path is None:
            return
        try:
            key = read_api_key_file(self._path)
        except ConfigError as err:
            self._cannot_read(str(err))
            return
        if self._unreadable is not None:
            log.info(
                "%s=%s reads again: the controller uses the key it holds",
                KEY_FILE_VARIABLE,
                self._path,
            )
            self._unreadable = None
        if key == self._key:
            return
        # The redactor first: from here on a text may hold the new key.
        self._redactor.keep_secret(key)
        self._seen = (*self._seen, key)
        self._runpod.use_key(key)
        self._key = key
        log.info(
            "the RunPod key in %s=%s changed: RunPod calls send the new key from now on, "
            "no restart needed",
            KEY_FILE_VARIABLE,
            self._path,
        )

    def _cannot_read(self, problem: str) -> None:
        """Keep the last good key; warn once per distinct problem, not every loop."""
        # The ConfigError names the variable and path first; the source names them too.
        why = problem.removeprefix(f"{KEY_FILE_VARIABLE}={self._path}: ")
        if why != self._unreadable:
            log.warning("%s; the controller keeps sending the key it last read there", problem)
        self._unreadable = why
