"""A dependency-free progress bar on stderr, shown only on a TTY unless forced."""

from __future__ import annotations

import sys


class Progress:
    def __init__(self, total: int, label: str, enabled: bool | None = None, stream=None):
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.total, self.label, self.done, self._last = max(total, 1), label, 0, -1

    def step(self, n: int = 1) -> None:
        self.done += n
        if not self.enabled:
            return
        pct = min(100, self.done * 100 // self.total)
        if pct != self._last:
            self._last = pct
            bar = "#" * (pct // 4) + "-" * (25 - pct // 4)
            self.stream.write(f"\r{self.label} [{bar}] {pct:3d}% ({self.done}/{self.total})")
            self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()
