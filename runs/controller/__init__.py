"""The controller: maps the backend's status onto the run records (docs/architecture.md).

`rules` holds the decisions as plain functions of plain values; `reconcile` reads the live
runs, asks the backend outside any lock and writes a record only if it did not change.
"""
