"""The pipeline's log file (work folder's pipeline.log), shared by the steps and the precompile process."""

from __future__ import annotations

import os
import threading
import time

from minismt.progress import log


class PipelineLog:
    """Appends time-stamped lines to the log file; echoes them to stderr (above any progress bar)."""

    def __init__(self, path: str, echo: bool = True):
        self.path = path
        self.echo = echo
        self._lock = threading.Lock()
        os.makedirs(os.path.dirname(path), exist_ok=True)

    def __call__(self, message: str) -> None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        with self._lock:
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write(f"{stamp} {message}\n")
            if self.echo:
                log(f"[pipeline] {message}")
