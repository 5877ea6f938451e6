"""The simulator's own suite uses the simulator's fixtures."""

from tests.sim.fixtures import kube, sim_cluster

__all__ = ["kube", "sim_cluster"]
