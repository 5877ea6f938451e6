"""Example task types."""
