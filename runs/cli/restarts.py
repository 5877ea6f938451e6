"""When to restart a service that exited, and when to give up: plain values, no processes.

Like systemd's `Restart=on-failure` with `StartLimitBurst`: a service that exits is started
again after a delay that doubles with each crash in a row (1 s, 2 s, 4 s … at most 30 s) and
starts again from the first delay once the service stayed up for a while; more than `burst`
crashes of one service within `window_s` seconds is a crash loop that restarting will not fix.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class RestartPolicy:
    first_delay_s: float = 1.0
    max_delay_s: float = 30.0
    burst: int = 5  # restarts allowed within the window; one crash more gives up
    window_s: float = 60.0
    settled_s: float = 60.0  # up this long, the next crash waits the first delay again


@dataclass
class CrashHistory:
    """The crashes of one service, and the delay before its next start."""

    policy: RestartPolicy
    crashes: list[float] = field(default_factory=list)  # monotonic times within the window
    in_a_row: int = 0

    def crashed(self, *, at: float, up_for: float) -> float | None:
        """Note a crash at `at` after `up_for` seconds up: the delay before starting the
        service again, or None when it crashed more than `burst` times within the window."""
        if up_for >= self.policy.settled_s:
            self.in_a_row = 0
        self.crashes = [t for t in self.crashes if at - t < self.policy.window_s] + [at]
        if len(self.crashes) > self.policy.burst:
            return None
        delay = min(self.policy.max_delay_s, self.policy.first_delay_s * 2**self.in_a_row)
        self.in_a_row += 1
        return delay
