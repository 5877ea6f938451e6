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
    with multiprocessing.get_context("fork").Pool(processes) as pool:
        done = pool.starmap(unit, [(i, seconds) for i in range(units)])
    assert len(done) == units


if __name__ == "__main__":
    main()
