"""The repressilator (a ring of three repressors), dimensionless, as plain ODEs.

mRNA m_i is transcribed at alpha0 + alpha / (1 + p_j^n), repressed by the protein p_j of the
gene before it in the ring (p3 represses gene 1, p1 gene 2, p2 gene 3), and decays at rate 1;
protein p_i is translated from m_i and decays, both at rate beta. The same model is
`examples/models/repressilator/repressilator.ant` in Antimony.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np  # imported where it computes: listing types stays fast

SPECIES = ("m1", "m2", "m3", "p1", "p2", "p3")
PARAMETERS = {"alpha": 216.0, "alpha0": 0.216, "beta": 5.0, "n": 2.0}
INITIAL = {"m1": 0.0, "m2": 0.0, "m3": 0.0, "p1": 5.0, "p2": 0.0, "p3": 15.0}


def initial_state() -> np.ndarray:
    import numpy as np

    return np.array([INITIAL[s] for s in SPECIES])


def rhs(y: np.ndarray, t: float, alpha: float, alpha0: float, beta: float, n: float) -> np.ndarray:
    """d(m1, m2, m3, p1, p2, p3)/dt."""
    import numpy as np

    m = y[:3]
    p = y[3:]
    repressor = np.roll(p, 1)  # p3, p1, p2
    dm = alpha0 + alpha / (1.0 + np.power(np.maximum(repressor, 0.0), n)) - m
    dp = beta * (m - p)
    return np.concatenate([dm, dp])
