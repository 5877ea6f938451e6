"""Backends: where the pods of runs execute (Argo Workflows + Kueue, or this machine)."""
