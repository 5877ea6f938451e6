"""The thread that runs the simulated controllers, and how they are paused.

A pass calls `step()` of every controller that is not paused, in a fixed order (taint
manager, Kueue, scheduler, kubelet, Job controller, Argo). After a pass that wrote something
the next one starts at once; after a quiet pass the loop waits for a write, an advance of the
clock, or `tick_s`. An exception in a controller is recorded in `errors` (and printed), and
the loop goes on.
"""

from __future__ import annotations

import sys
import threading
import traceback
from typing import Protocol

from tests.sim.store import Store


class Controller(Protocol):
    """What the loop runs: a name to pause it by and one step."""

    name: str

    def step(self) -> None: ...


class ControllerLoop:
    """Runs the controllers' passes in a background thread."""

    def __init__(self, store: Store, controllers: list[Controller], tick_s: float) -> None:
        self.store = store
        self.controllers = controllers
        self.tick_s = tick_s
        self.paused: set[str] = set()
        self.errors: list[str] = []
        self.pass_lock = threading.RLock()
        self.quiet_passes = 0
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="sim-controllers")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self.store.poke()
        self._thread.join(timeout=10)

    def run_pass(self) -> bool:
        """One pass of every running controller; True when it wrote nothing."""
        before = self.store.rv
        with self.pass_lock:
            for controller in self.controllers:
                if controller.name in self.paused:
                    continue
                try:
                    controller.step()
                except Exception:
                    self.errors.append(f"{controller.name}: {traceback.format_exc()}")
                    print(self.errors[-1], file=sys.stderr)
        return self.store.rv == before

    def _run(self) -> None:
        while not self._stopping.is_set():
            if self.run_pass():
                self.quiet_passes += 1
                self.store.wait(self.store.rv, self.tick_s)
