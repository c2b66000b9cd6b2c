"""Progress bars and log lines on stderr: bars only on a terminal, log lines never glued to a bar.

Every progress bar of minismt comes from :func:`bar` and every line a long-running
command writes next to one goes through :func:`log`:

- a bar is drawn only when stderr is a terminal (tqdm's ``disable=None``); in a log
  file or a pipe there are no bar fragments, only the log lines;
- :func:`log` writes through ``tqdm.write``, which lifts the bars off the line, writes
  the message and draws them again below it;
- a bar never shows a remaining time computed from a wait of unknown length:
  ``eta=False`` leaves out the rate and the remaining time (steps of very different
  lengths), ``warmup=True`` measures them from the end of the first unit (a first
  unit that starts worker processes or compiles numba kernels would otherwise make
  the estimate hours long), showing ``?`` until a second unit is done.
"""

from __future__ import annotations

import sys
import threading

from tqdm import tqdm

# tqdm's default layout without "<{remaining}, {rate_fmt}": the elapsed time and the count only
NO_ETA_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]"


class _Bar(tqdm):
    """A tqdm bar whose rate (and so remaining time) can start after the first unit."""

    def __init__(self, *args, warmup: bool = False, **kwargs):
        self._warmup = warmup
        self._first = None  # (time, n) when the bar first showed a finished unit
        super().__init__(*args, **kwargs)

    @property
    def format_dict(self):
        values = super().format_dict
        if not self._warmup or self.disable:
            return values
        now = self._time()
        if self._first is None and self.n > self.initial:
            self._first = (now, self.n)
        if self._first is None or self.n <= self._first[1] or now <= self._first[0]:
            values["rate"], values["initial"] = None, self.n  # nothing measured yet: "?" for rate and ETA
        else:
            values["rate"] = (self.n - self._first[1]) / (now - self._first[0])
        return values


def bar(iterable=None, *, total=None, desc: str | None = None, unit: str = "it", enabled: bool = True,
        eta: bool = True, warmup: bool = False, **options) -> tqdm:
    """A tqdm progress bar on stderr, drawn only when ``enabled`` and stderr is a terminal.

    ``eta=False``: no rate and no remaining time (for a few steps of unrelated lengths);
    ``warmup=True``: rate and remaining time measured from the end of the first unit (for a
    first unit that includes a wait of unknown length: worker start-up, numba compiling).
    ``options`` go to tqdm (``leave``, ``unit_scale``, ...).
    """
    if not eta:
        options.setdefault("bar_format", NO_ETA_FORMAT)
    return _Bar(iterable, total=total, desc=desc, unit=unit, disable=None if enabled else True,
                file=sys.stderr, warmup=warmup, **options)


def in_worker_process() -> None:
    """Call first in a worker process, which never draws a bar: tqdm's lock becomes a thread lock instead of
    the multiprocessing lock tqdm would make, a semaphore that a worker stopped at once (Ctrl-C) would leave
    behind ("leaked semaphore objects" at exit)."""
    tqdm.set_lock(threading.RLock())


def log(message: str) -> None:
    """Write ``message`` and a newline to stderr above any progress bar (never on a bar's line)."""
    tqdm.write(message, file=sys.stderr)
