"""The baseline of the scan benchmark: the same `spin` units on a bare multiprocessing.Pool.

    python bench/local/_bare_pool.py UNITS SECONDS PROCESSES

Run as a fresh process (not forked from the benchmark's Django process); prints the wall
seconds from creating the pool to the last result, as JSON.
"""

from __future__ import annotations

import json
import multiprocessing
import sys
import time

from simrun_examples.testing import spin


def main() -> None:
    units, seconds, processes = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    started = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(processes) as pool:
        done = pool.map(spin, [seconds] * units)
    wall = time.perf_counter() - started
    assert len(done) == units
    print(json.dumps({"wall_s": wall}))


if __name__ == "__main__":
    main()
