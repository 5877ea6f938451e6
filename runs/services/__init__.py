"""Writes of the domain: every change of state goes through these functions."""
