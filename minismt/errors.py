"""The one error type users see for bad input."""

from __future__ import annotations

import math
import os


class InputError(ValueError):
    """Bad input: names the file, the line and what was expected there.

    Every reader, the command line and the public API raise this for malformed
    files, mismatched line counts, NaN features and the like, so that a user
    never sees a traceback from deep inside numpy.
    """

    def __init__(self, message: str, path: str | os.PathLike | None = None,
                 line: int | None = None, expected: str | None = None):
        self.message = message
        self.path = None if path is None else os.fspath(path)
        self.line = line
        self.expected = expected
        super().__init__(str(self))

    def __str__(self) -> str:
        where = ""
        if self.path is not None:
            where = self.path
            if self.line is not None:
                where += f":{self.line}"
            where += ": "
        elif self.line is not None:
            where = f"line {self.line}: "
        text = where + self.message
        if self.expected:
            text += f" (expected {self.expected})"
        return text

    def __reduce__(self):
        return (type(self), (self.message, self.path, self.line, self.expected))


def finite_number(value, what: str) -> float:
    """``value`` as a float, or an :class:`InputError` saying that ``what`` is not a (finite) number."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{what} is {value!r}", expected="a number") from None
    if not math.isfinite(number):
        raise InputError(f"{what} is {number}", expected="a finite number")
    return number
