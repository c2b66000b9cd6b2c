"""Mutations of valid sample files, shared by the fuzz tests of the line-based readers."""

from __future__ import annotations

import gzip

from hypothesis import strategies as st


def mutations(tokens: list[str], any_separator: bool = False):
    """A hypothesis strategy factory: ``mutations(TOKENS)(sample)`` draws ``sample`` (bytes) with lines and
    fields dropped, duplicated, swapped, truncated, replaced by one of ``tokens`` or cut by bad UTF-8 bytes,
    maybe gzipped and cut. Fields are split at ``|||`` where a line has one (``any_separator``: at ``|||``
    or at a space, drawn)."""

    @st.composite
    def mutated(draw, sample: bytes):
        lines = sample.split(b"\n")
        for _ in range(draw(st.integers(0, 4))):
            i = draw(st.integers(0, len(lines) - 1))
            op = draw(st.sampled_from(["truncate", "drop", "duplicate", "drop_field", "duplicate_field",
                                       "token", "bytes", "swap"]))
            line = lines[i]
            if any_separator:
                sep = draw(st.sampled_from([b"|||", b" "]))
            else:
                sep = b"|||" if b"|||" in line else b" "
            fields = line.split(sep)
            j = draw(st.integers(0, len(fields) - 1))
            if op == "truncate":
                lines[i] = line[:draw(st.integers(0, len(line)))]
            elif op == "drop":
                del lines[i]
            elif op == "duplicate":
                lines.insert(i, line)
            elif op == "drop_field":
                del fields[j]
                lines[i] = sep.join(fields)
            elif op == "duplicate_field":
                fields.insert(j, fields[j])
                lines[i] = sep.join(fields)
            elif op == "token":
                fields[j] = draw(st.sampled_from(tokens)).encode()
                lines[i] = sep.join(fields)
            elif op == "bytes":
                at = draw(st.integers(0, len(line)))
                lines[i] = line[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xe2\x82", b"\x80"])) + line[at:]
            else:
                k = draw(st.integers(0, len(lines) - 1))
                lines[i], lines[k] = lines[k], lines[i]
            if not lines:
                lines = [b""]
        data = b"\n".join(lines)
        if draw(st.booleans()):
            data = data[:draw(st.integers(0, len(data)))]
        if draw(st.integers(0, 9)) == 0:
            data = gzip.compress(data, mtime=0)
            if draw(st.booleans()):
                data = data[:draw(st.integers(0, len(data)))]
        return data

    return mutated
