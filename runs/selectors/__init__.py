"""Reads of the domain: what pages, the API and the controller query."""
