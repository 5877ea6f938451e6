"""Shapes of the API's requests and answers; no logic beyond checking input types and ranges.

Answers are serialized from the plain values of `runs.selectors` and `runs.services`; the
same classes describe them in the OpenAPI document. One module per subject of the views
(`runs.py`, `workflows.py`, `operations.py` for the admin's and the servers', `snapshots.py`),
the error shape (`errors.py`) and the input fields they share (`fields.py`).
"""
