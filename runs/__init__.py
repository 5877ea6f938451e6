"""The simrun domain: workflows, runs, tasks, planning, resources, the controller, the surfaces."""
