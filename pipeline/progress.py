"""Progress reports that suit where the output goes.

On a terminal: live tqdm bars. Elsewhere (a stage run by DVC, a CI log, ``> log``): tqdm's
carriage-return redraws, nested bars above all, fill a log with escape sequences (about 250 KB
for one train stage), so there the outer loop prints one plain line each time it passes
another ``PLAIN_EVERY_PERCENT`` of its work, with the elapsed time and an estimate of the time
left, and an inner loop (the epochs of one chunk of seeds) prints a line only when another
``HEARTBEAT_SECONDS`` have passed: a short chunk stays quiet, a long one (one chunk of 20 seeds
trained 515 epochs in 84 min on a 2-core CPU) says where it is. Written by hand because tqdm
has no such mode: off a terminal it still redraws the line for every update it shows.
"""
from __future__ import annotations

import sys
import time

from tqdm import tqdm

PLAIN_EVERY_PERCENT = 10
HEARTBEAT_SECONDS = 120


def on_terminal() -> bool:
    return sys.stderr.isatty()


def duration(seconds: float) -> str:
    """``42 s``, ``3.5 min``, ``2.1 h``, ``4.0 days``: as a person reads a time estimate."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.1f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


class PlainLines:
    """A tqdm-like counter that prints ``desc: 40/100 seed (40%), 1.2 min elapsed, ~1.8 min
    left`` when it has passed another ``every_percent`` of ``total`` (and at the end)."""

    def __init__(self, total: int, desc: str, unit: str, every_percent: int = PLAIN_EVERY_PERCENT, file=None):
        self.total, self.desc, self.unit, self.n = total, desc, unit, 0
        self.step = max(1, total * every_percent // 100)
        self.next_report = self.step
        self.start = time.perf_counter()
        self.file = file or sys.stderr
        self.postfix = ""
        print(f"{desc}: {total} {unit} to go", file=self.file, flush=True)

    def update(self, n: int = 1) -> None:
        self.n += n
        if self.n >= self.next_report or self.n >= self.total:
            elapsed = time.perf_counter() - self.start
            left = elapsed / self.n * (self.total - self.n)
            print(f"{self.desc}: {self.n}/{self.total} {self.unit} ({100 * self.n // self.total}%), "
                  f"{duration(elapsed)} elapsed, ~{duration(left)} left{self.postfix}", file=self.file, flush=True)
            self.next_report = (self.n // self.step + 1) * self.step  # one line per update at most

    def set_postfix(self, **values) -> None:
        self.postfix = "".join(f", {k} {v}" for k, v in values.items())

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Heartbeat:
    """An inner loop's bar off a terminal: ``desc: epoch 250 of at most 1000, 4.1 min elapsed,
    active 20`` once every ``seconds`` of wall time, nothing for a loop shorter than that. No
    time left: early stopping ends a chunk before ``total``, at an epoch nobody knows yet."""

    def __init__(self, total: int, desc: str, unit: str, seconds: float = HEARTBEAT_SECONDS,
                 file=None, clock=time.perf_counter):
        self.total, self.desc, self.unit, self.n = total, desc, unit, 0
        self.seconds, self.clock, self.file = seconds, clock, file or sys.stderr
        self.start = self.clock()
        self.next_report = self.start + seconds
        self.postfix = ""

    def update(self, n: int = 1) -> None:
        self.n += n
        now = self.clock()
        if now >= self.next_report:
            print(f"{self.desc}: {self.unit} {self.n} of at most {self.total}, "
                  f"{duration(now - self.start)} elapsed{self.postfix}", file=self.file, flush=True)
            self.next_report = now + self.seconds

    def set_postfix(self, **values) -> None:
        self.postfix = "".join(f", {k} {v}" for k, v in values.items())

    def close(self) -> None:
        pass


def outer(total: int, desc: str, unit: str):
    """The bar of a stage's main loop: tqdm on a terminal, :class:`PlainLines` elsewhere."""
    if on_terminal():
        return tqdm(total=total, desc=desc, unit=unit)
    return PlainLines(total, desc, unit)


def inner(total: int, desc: str, unit: str):
    """A bar nested in an outer one (epochs of a chunk): tqdm on a terminal, a
    :class:`Heartbeat` elsewhere."""
    if on_terminal():
        return tqdm(total=total, desc=desc, unit=unit, leave=False)
    return Heartbeat(total, desc, unit)
