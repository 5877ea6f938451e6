"""The local backend's index of workflows: the run behind each workflow name.

    <state>/workflows/<workflow>.json   {"run_id": ...}, created once when the run is submitted

A process keeps what it read of it: the run id of each entry (None once that run ended: an end
is final, so a pass no longer looks at it) and each live run's launch (written once). Both are
caches of the files, rebuilt from them by a new process.
"""

from __future__ import annotations

from pathlib import Path

from cluster.local.atomic_files import create_json, read_json
from cluster.local.run_files import RunFiles
from runs.ports import RunLaunch
from simrun_harness.layout import StorePaths, check_name


class RunIndex:
    """The workflow names of the runs in a store, and the launches of the live ones."""

    def __init__(self, store: StorePaths, directory: Path) -> None:
        self.store = store
        self.directory = directory
        self._indexed: dict[str, str | None] = {}
        self._launches: dict[str, tuple[RunLaunch, float]] = {}

    def entry(self, name: str) -> Path:
        """The index file of a workflow name; ValueError for a name no workflow can have."""
        return self.directory / f"{check_name(name, what='workflow name')}.json"

    def add(self, launch: RunLaunch) -> None:
        """Name the run's workflow (once: a second submission keeps the first entry)."""
        create_json(self.entry(launch.workflow_name), {"run_id": launch.run_id})

    def files(self, run_id: str) -> RunFiles:
        return RunFiles(self.store.run(run_id))

    def run(self, name: str) -> RunFiles:
        """The run of a workflow; KeyError when there is none (or its files are gone)."""
        try:
            entry = read_json(self.entry(name))
        except ValueError:  # not a valid name: no such workflow
            raise KeyError(name) from None
        if entry is None:
            raise KeyError(name)
        run = self.files(entry["run_id"])
        if not run.exists():
            raise KeyError(name)
        return run

    def live_runs(self) -> list[RunFiles]:
        """The runs not ended yet; forgets the launches of the others."""
        runs = []
        names = sorted(self.directory.glob("*.json")) if self.directory.is_dir() else []
        for entry in names:
            if entry.name not in self._indexed:
                data = read_json(entry)
                if data is None:
                    continue
                self._indexed[entry.name] = str(data["run_id"])
            run_id = self._indexed[entry.name]
            if run_id is None:
                continue
            run = self.files(run_id)
            if run.ended:
                self._indexed[entry.name] = None
            elif run.exists():
                runs.append(run)
        kept = {run.run_id for run in runs}
        for gone in [r for r in self._launches if r not in kept]:
            del self._launches[gone]
        if len(self._indexed) > len(names):
            listed = {entry.name for entry in names}
            self._indexed = {k: v for k, v in self._indexed.items() if k in listed}
        return runs

    def launch(self, run: RunFiles) -> tuple[RunLaunch, float]:
        """The run's launch and submission time, read once per process."""
        found = self._launches.get(run.run_id)
        if found is None:
            found = self._launches[run.run_id] = run.launch()
        return found
