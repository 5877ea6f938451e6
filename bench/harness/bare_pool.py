"""The baseline of the harness benchmark: the same CPU units on a bare multiprocessing.Pool.

python bench/harness/bare_pool.py UNITS SECONDS PROCESSES
"""

from __future__ import annotations

import multiprocessing
import sys

from simrun_examples.testing import spin


def unit(index: int, seconds: float) -> int:
    spin(seconds)
    return index


def main() -> None:
    units, seconds, processes = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    mode = sys.argv[4] if len(sys.argv) > 4 else "map"
    jobs = [(i, seconds) for i in range(units)]
    with multiprocessing.get_context("fork").Pool(processes) as pool:
        if mode == "map":
            done = pool.starmap(unit, jobs)
        else:
            done = list(pool.imap_unordered(unit_of, jobs, chunksize=1))
    assert len(done) == units


def unit_of(job: tuple[int, float]) -> int:
    return unit(*job)


if __name__ == "__main__":
    main()
