"""The API for agents and scripts: DRF under /api/, bearer tokens, an OpenAPI document.

Views and serializers are thin: the work is in `runs.services` and `runs.selectors`.
"""
