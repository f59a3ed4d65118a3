"""A progress line on stderr: done/total, events/s, ETA. Plain lines when stderr is not a terminal."""
from __future__ import annotations

import sys
import time


def _hms(seconds: float) -> str:
    seconds = int(max(0, seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class Progress:
    def __init__(self, label: str, total: int, enabled: bool = True, stream=None, every: float | None = None):
        self.label = label
        self.total = max(0, total)
        self.done = 0
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.every = every if every is not None else (0.2 if self.tty else 5.0)
        self.started = time.monotonic()
        self._shown = 0.0

    def line(self) -> str:
        elapsed = max(time.monotonic() - self.started, 1e-9)
        rate = self.done / elapsed
        pct = 100.0 * self.done / self.total if self.total else 100.0
        eta = (self.total - self.done) / rate if rate > 0 and self.total > self.done else 0.0
        width = 24
        filled = int(width * min(pct, 100.0) / 100)
        return (f"{self.label} [{'#' * filled}{'.' * (width - filled)}] {pct:5.1f}% "
                f"{self.done:,}/{self.total:,} events  {rate:,.0f} ev/s  ETA {_hms(eta)}")

    def update(self, n: int) -> None:
        self.done += n
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._shown >= self.every:
            self._shown = now
            self._write()

    def _write(self) -> None:
        if self.tty:
            self.stream.write("\r" + self.line() + "\x1b[K")
        else:
            self.stream.write(self.line() + "\n")
        self.stream.flush()

    def note(self, text: str) -> None:
        if self.enabled:
            self.stream.write(("\n" if self.tty else "") + text + "\n")
            self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self._write()
            if self.tty:
                self.stream.write("\n")
            self.stream.flush()


def note(text: str, enabled: bool = True) -> None:
    if enabled:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
