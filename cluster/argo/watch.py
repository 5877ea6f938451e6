"""One thread that watches the runs' workflows and wakes their subscribers (B8).

The first subscription starts the thread; every later one shares it. The thread lists the
workflows (to learn the resourceVersion to watch from), wakes the subscribers once (a change
may have happened while nobody watched), then watches and wakes them on every event. A watch
that ends (its timeout) is renewed from the last version seen; an error (the API server gone,
410 Expired after a compaction) is logged and the thread starts over after a pause, so a
subscriber is never left without wakes for long. `close` stops the thread at its next event
or the end of the current watch request; the controller's own polling covers any gap.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from kubernetes import watch
from kubernetes.client import ApiClient, CustomObjectsApi

from runs.ports import tell_subscribers

log = logging.getLogger(__name__)

GROUP, VERSION, PLURAL = "argoproj.io", "v1alpha1", "workflows"
RUN_LABEL = "simrun/run"
RESTART_PAUSE_S = (0.5, 30.0)


class WorkflowWatch:
    """The shared watch of the workflows of runs in one namespace."""

    def __init__(self, api: Callable[[], ApiClient], namespace: str, timeout_s: int = 60) -> None:
        """`api` makes the client the thread uses (its own connection pool)."""
        self._api = api
        self.namespace = namespace
        self.timeout_s = timeout_s
        self._callbacks: list[Callable[[], None]] = []
        # Subscribers (the watcher, the backend's callers) come from several threads: without
        # it two of them, both seeing no live thread, would each start a watch thread.
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None
        self._watch: watch.Watch | None = None
        self.restarts = 0
        self.events = 0
        self.threads_started = 0

    def subscribe(self, callback: Callable[[], None]) -> None:
        """Call `callback` (from the watch thread) on every change of a run's workflow."""
        with self._lock:
            self._callbacks.append(callback)
            if self._thread is None or not self._thread.is_alive():
                self._closing.clear()
                self._thread = threading.Thread(
                    target=self._run, name="simrun-argo-watch", daemon=True
                )
                self._thread.start()
                self.threads_started += 1

    def close(self) -> None:
        """Stop the thread at its next event (or the end of its current watch request)."""
        self._closing.set()
        current = self._watch
        if current is not None:
            current.stop()

    def join(self, timeout_s: float | None = None) -> bool:
        """Wait for the thread to end after `close`; whether it has."""
        thread = self._thread
        if thread is None:
            return True
        thread.join(timeout_s)
        return not thread.is_alive()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _wake(self) -> None:
        tell_subscribers(self._callbacks, what="the workflow watch")

    def _run(self) -> None:
        pause = RESTART_PAUSE_S[0]
        while not self._closing.is_set():
            try:
                with self._api() as client:
                    self._follow(CustomObjectsApi(client))
                pause = RESTART_PAUSE_S[0]
            except Exception as error:  # the API server gone, 410 Expired, a broken stream
                if self._closing.is_set():
                    break
                self.restarts += 1
                log.warning("the workflow watch failed (%s); restarting in %.1fs", error, pause)
                self._closing.wait(pause)
                pause = min(pause * 2, RESTART_PAUSE_S[1])

    def _follow(self, custom: CustomObjectsApi) -> None:
        """List once, wake, then watch from the list's version until closed or an error."""
        listed: dict[str, Any] = custom.list_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURAL, label_selector=RUN_LABEL
        )
        version = str((listed.get("metadata") or {}).get("resourceVersion") or "")
        self._wake()
        while not self._closing.is_set():
            self._watch = watch.Watch()
            stream = self._watch.stream(
                custom.list_namespaced_custom_object,
                GROUP,
                VERSION,
                self.namespace,
                PLURAL,
                label_selector=RUN_LABEL,
                resource_version=version,
                timeout_seconds=self.timeout_s,
                allow_watch_bookmarks=False,
            )
            for event in stream:
                if event.get("type") == "ERROR":
                    raise RuntimeError(f"the watch answered an error: {event.get('raw_object')}")
                obj = event.get("object") or {}
                version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                self.events += 1
                self._wake()
                if self._closing.is_set():
                    return
