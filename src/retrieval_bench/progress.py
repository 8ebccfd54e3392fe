"""Progress for long work (encoding, tokenising, ranking): rate and time left, on any output.

On a terminal it is a plain tqdm bar on stderr. When stderr is not a terminal (a cron job, CI,
`> log 2>&1`, a Hydra multirun), a bar would be one growing line of carriage returns that
nobody sees until the end, so the same tqdm object reports through logging instead: one line
when the work has run `START_DELAY_S`, then one every `LOG_INTERVAL_S`, and a last line with the
total time, e.g. `encoding passages (USE): 1200/5183 (23%), 9.1 passage/s, ~07:17 left`. Work
that ends within `START_DELAY_S` prints nothing either way.
"""

from __future__ import annotations

import contextlib
import io
import logging
import sys
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

from tqdm import tqdm

log = logging.getLogger(__name__)

T = TypeVar("T")

START_DELAY_S = 2.0
"""Work shorter than this stays silent (both on a terminal and in logs)."""
LOG_INTERVAL_S = 15.0
"""Seconds between two log lines of the same work when stderr is not a terminal."""


class _LoggedProgress(tqdm):  # type: ignore[type-arg]
    """tqdm whose display is a log line at most every `interval` seconds (tqdm's documented way
    to give it another front end: override `display` and read `format_dict`)."""

    def __init__(self, *args: Any, interval: float, **kwargs: Any) -> None:
        self._interval = interval
        self._logged_at: float | None = None
        # tqdm still writes '' and '\n' to its file on close; nothing else reaches it.
        # miniters=1: check the clock at every update (cheap), so no report is skipped by
        # tqdm's adaptive update count.
        mininterval = min(1.0, interval, kwargs.get("delay", 0.0))
        super().__init__(*args, file=io.StringIO(), mininterval=mininterval, miniters=1, **kwargs)

    def display(self, msg: str | None = None, pos: int | None = None) -> bool:
        now = self._time()
        # close() sets `disable` before its final display, and skips that display when the
        # work ended within the start delay: so a closing call always gets its line.
        closing = self.disable
        if not closing and (
            self.n == 0  # nothing done yet: no rate to report
            or (self.total and self.n >= self.total)  # the closing line says it, with the time
            or (self._logged_at is not None and now - self._logged_at < self._interval)
        ):
            return True
        self._logged_at = now
        log.info(progress_line(self.format_dict, done=closing))
        return True


def progress_line(info: dict[str, Any], done: bool = False) -> str:
    """`desc: n/total (p%), rate unit/s, ~mm:ss left`; at the end `... done in mm:ss, rate`
    (or `stopped after mm:ss` when the work ended before its total)."""
    n, total, elapsed = info["n"], info["total"], info["elapsed"]
    rate = info["rate"] or (n / elapsed if elapsed else None)
    unit = info["unit"]
    speed = f"{rate:.1f} {unit}/s" if rate else f"? {unit}/s"
    counted = f"{n}/{total} ({100 * n / total:.0f}%)" if total else f"{n}"
    if done:  # closed: finished, or stopped early (an error, Ctrl-C)
        verb = "stopped after" if total and n < total else "done in"
        return f"{info['prefix']}: {counted}, {verb} {tqdm.format_interval(elapsed)}, {speed}"
    left = f"~{tqdm.format_interval((total - n) / rate)}" if rate and total else "~?"
    return f"{info['prefix']}: {counted}, {speed}, {left} left"


def progress(
    desc: str, total: int, unit: str = "item", iterable: Iterable[T] | None = None
) -> tqdm:  # type: ignore[type-arg]
    """A tqdm over `total` units (iterate it when `iterable` is given, else call `update`):
    a bar on a terminal, log lines otherwise (see the module docstring)."""
    if sys.stderr.isatty():
        return tqdm(
            iterable, desc=desc, total=total, unit=unit, delay=START_DELAY_S, dynamic_ncols=True
        )
    return _LoggedProgress(
        iterable, desc=desc, total=total, unit=unit, delay=START_DELAY_S, interval=LOG_INTERVAL_S
    )


@contextlib.contextmanager
def progress_on_stderr() -> Iterator[None]:
    """While a command runs outside the Hydra app (which configures logging itself), its
    progress lines go to stderr when stderr is not a terminal: a handler on this module's
    logger alone, taken down afterwards, so nothing else the library logs changes."""
    if sys.stderr.isatty() or log.handlers:
        yield
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    level, propagate = log.level, log.propagate
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False  # the app's own handlers, where there are any, would print it twice
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
        log.propagate = propagate
