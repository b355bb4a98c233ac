"""A latest-wins background worker: the GUI hands it work faster than it can be done, it does
only the newest, so a slow report (the exact collision check) trails a drag instead of holding
up every pointer move."""

from __future__ import annotations

import collections
import threading
import time


class LatestWins:
    """Runs ``fn(x)`` on a daemon thread for the newest ``submit(x)``; older pending ones are
    dropped (``dropped`` counts them). ``wait()`` blocks until nothing is pending or running.
    ``last_s``: seconds from the submit of the last finished item to its end; ``history``: the
    (submitted, started, finished) ``time.perf_counter`` times of the last ``HISTORY`` finished
    items (what a latency benchmark reads). An exception in ``fn`` is kept in ``error`` (the
    worker goes on)."""

    HISTORY = 4096

    def __init__(self, fn, name: str = "studio-worker"):
        self.fn = fn
        self._cv = threading.Condition()
        self._pending = None  # (x, submit time) or None
        self._busy = False
        self._closed = False
        self.dropped = 0
        self.done = 0
        self.last_s = None
        self.error = None
        self.history = collections.deque(maxlen=self.HISTORY)
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(self, x) -> None:
        with self._cv:
            if self._pending is not None:
                self.dropped += 1
            self._pending = (x, time.perf_counter())
            self._cv.notify_all()

    @property
    def pending(self) -> bool:
        """Whether a submitted item waits (a newer one than the item running now)."""
        return self._pending is not None

    def idle_for(self) -> float:
        """Seconds since the last item finished, 0 while one is pending or running (inf: none
        has run yet)."""
        with self._cv:
            if self._pending is not None or self._busy:
                return 0.0
            return time.perf_counter() - self.history[-1][2] if self.history else float("inf")

    def wait(self, timeout: float = 60.0) -> bool:
        """True once idle (nothing pending, nothing running); False on timeout."""
        end = time.monotonic() + timeout
        with self._cv:
            while self._pending is not None or self._busy:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._cv.wait(left)
        return True

    def _loop(self) -> None:
        while True:
            with self._cv:
                while self._pending is None and not self._closed:
                    self._cv.wait()
                if self._closed:
                    return
                (x, t0), self._pending = self._pending, None
                self._busy = True
            t1 = time.perf_counter()
            try:
                self.fn(x)
            except Exception as exc:  # kept for the caller; a GUI worker must not die
                self.error = f"{type(exc).__name__}: {exc}"
            with self._cv:
                self._busy = False
                self.done += 1
                t2 = time.perf_counter()
                self.last_s = t2 - t0
                self.history.append((t0, t1, t2))
                self._cv.notify_all()

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._pending = None
            self._cv.notify_all()
        self._thread.join(timeout=5.0)


__all__ = ["LatestWins"]
