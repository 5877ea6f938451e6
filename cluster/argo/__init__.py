"""The Argo backend: runs as Argo Workflows on a k3s cluster, admitted and preempted by Kueue.

See `backend.ArgoBackend` and docs/argo-backend.md.
"""
