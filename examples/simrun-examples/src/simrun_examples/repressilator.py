"""The repressilator (a ring of three repressors), dimensionless, as plain ODEs.

mRNA m_i is transcribed at alpha0 + alpha / (1 + p_j^n), repressed by the protein p_j of the
gene before it in the ring (p3 represses gene 1, p1 gene 2, p2 gene 3), and decays at rate 1;
protein p_i is translated from m_i and decays, both at rate beta. The same model is
`examples/models/repressilator/repressilator.ant` in Antimony.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np  # imported where it computes: listing types stays fast

SPECIES = ("m1", "m2", "m3", "p1", "p2", "p3")
PARAMETERS = {"alpha": 216.0, "alpha0": 0.216, "beta": 5.0, "n": 2.0}
INITIAL = {"m1": 0.0, "m2": 0.0, "m3": 0.0, "p1": 5.0, "p2": 0.0, "p3": 15.0}


def initial_state() -> np.ndarray:
    import numpy as np

    return np.array([INITIAL[s] for s in SPECIES])


def power(base: float, exponent: float) -> float:
    """`base ** exponent` in Python floats: the C library's `pow`, the same bits whatever the
    CPU. numpy's `power` (and `log10`, `exp`, ...) picks a kernel by the CPU it runs on, and its
    AVX-512 kernel rounds some results differently in the last bit than the others; an ODE
    solver carries such a bit into every later step, so a run on another machine would write
    other bytes. An overflow is infinity, as numpy's."""
    try:
        return math.pow(base, exponent)
    except OverflowError:
        return math.inf


def rhs(y: np.ndarray, t: float, alpha: float, alpha0: float, beta: float, n: float) -> np.ndarray:
    """d(m1, m2, m3, p1, p2, p3)/dt."""
    import numpy as np

    m = y[:3]
    p1, p2, p3 = (max(float(v), 0.0) for v in y[3:])
    # the Hill term of the repressors p3, p1, p2 (not np.power: see `power`); the rest is
    # arithmetic, which rounds alike on every CPU
    hill = np.array([power(p3, n), power(p1, n), power(p2, n)])
    dm = alpha0 + alpha / (1.0 + hill) - m
    dp = beta * (m - y[3:])
    return np.concatenate([dm, dp])
