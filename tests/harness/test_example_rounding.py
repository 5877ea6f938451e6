"""The example ODE scan writes the same bits on any CPU (docs/provenance.md, "Same bytes").

numpy computes its functions with a kernel chosen for the CPU it runs on. Arithmetic, square
roots and comparisons give the same bits whatever the kernel: IEEE 754 fixes their results.
Its transcendental functions (`power`, `log10`, `exp`, ...) do not: their AVX-512 kernels
round some results differently from the others, and an ODE solver carries a last bit into
every step after it. So the scan calls none of them; `math.pow` computes its powers.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from simrun_examples.scan import OdeScan
from tests.harness.scans import run_in_process

CORRECTLY_ROUNDED = frozenset(
    {
        *("add", "subtract", "multiply", "divide", "negative", "positive", "absolute"),
        *("maximum", "minimum", "fmax", "fmin", "sqrt", "square", "sign"),
        *("equal", "not_equal", "less", "less_equal", "greater", "greater_equal"),
        *("logical_and", "logical_or", "logical_not", "isnan", "isinf", "isfinite"),
        *("floor", "ceil", "rint", "trunc"),
    }
)
"""numpy's functions whose results IEEE 754 fixes: every kernel gives the same bits."""

SCAN = {
    # a log range (its values are powers of ten) and Hill coefficients other than 1 and 2,
    # which numpy's power computes without its kernel (as x and x * x)
    "parameters": {"alpha": {"start": 1, "stop": 1000, "num": 3, "scale": "log"}, "n": [2.5, 4]},
    "t_end": 20.0,
    "n_points": 11,
}


@contextmanager
def numpy_functions_called() -> Iterator[set[str]]:
    """The names of the numpy functions (ufuncs, or their methods such as `reduce`) that Python
    code calls within the block, seen by `sys.monitoring`."""
    called: set[str] = set()

    def on_call(code: Any, offset: int, function: object, arg0: object) -> None:
        ufunc = function if isinstance(function, np.ufunc) else getattr(function, "__self__", None)
        if isinstance(ufunc, np.ufunc):
            called.add(ufunc.__name__)

    monitoring = sys.monitoring
    tool = next(i for i in range(6) if monitoring.get_tool(i) is None)
    monitoring.use_tool_id(tool, "numpy functions called")
    callback: Callable[..., object] = on_call
    monitoring.register_callback(tool, monitoring.events.CALL, callback)
    monitoring.set_events(tool, monitoring.events.CALL)
    try:
        yield called
    finally:
        monitoring.set_events(tool, 0)
        monitoring.register_callback(tool, monitoring.events.CALL, None)
        monitoring.free_tool_id(tool)


def test_the_ode_scan_calls_no_numpy_function_that_rounds_by_cpu(tmp_path: Path) -> None:
    run_in_process(OdeScan(), {**SCAN, "chunk": 6}, tmp_path / "first")  # imports done

    with numpy_functions_called() as called:
        out = run_in_process(OdeScan(), {**SCAN, "chunk": 2}, tmp_path / "scan")

    assert (out / "scan.nc").is_file()
    assert "multiply" in called or "subtract" in called  # the monitor sees numpy's calls
    assert called - CORRECTLY_ROUNDED == set()
