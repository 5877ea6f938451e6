"""The exit codes of the harness, the contract with the service and the retry rules.

The service imports these: 3 and 4 are never retried, 5 is a store that cannot be written,
137 is retried with the retry memory, 143 is a preemption. Any other non-zero code is an
unexpected failure of the harness itself.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1
"""Anything unexpected: a bug of the harness, a run store that cannot be written."""
EXIT_ANALYSIS = 3
"""A unit (or the merge, or an unsplit run) raised: the analysis failed. Never retried."""
EXIT_CONFIGURATION = 4
"""A missing or malformed variable, task file, type or setting. Never retried."""
EXIT_STORE = 5
"""The run store refused a write (read-only, no permission, no space): not the analysis's
fault. The service fails the task with "the store is not writable: PATH"."""
EXIT_POOL_BROKEN = 137
"""A process of the pool was killed (for memory, by the harness or the kernel)."""
EXIT_TERMINATED = 143
"""Stopped by SIGTERM (a preemption): claims returned, report written."""

NEVER_RETRIED = frozenset({EXIT_ANALYSIS, EXIT_CONFIGURATION})
