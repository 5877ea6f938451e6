"""Workflow Run RO-Crates: a run taken out as the community's record of a workflow run, checked
offline, and brought back to run again (docs/provenance.md). Plain code: no Django, so the
command line validates a crate without a service."""
