"""Where a phrase-based sentence's decoding time goes: perf samples mapped to numba's compiled functions.

perf cannot name the code numba compiles at run time (llvmlite's JIT registers no perf map, and
``NUMBA_ENABLE_PROFILING`` writes none with the llvmlite wheels), so this script writes the map perf reads
(``/tmp/perf-PID.map``): the entry point of every function numba compiled for the decoder, each taken
to extend to the next entry. numba compiles into a fresh cache folder here, so that the callees of
the kernels are compiled (and named) too; helpers inlined into a kernel count as the kernel's. numba's
reference counting (``NRT_incref``/``NRT_decref``) is named when a kernel links it.

    python benchmarks/jit_profile.py --model MODEL --input test.src [--sentences 300] [--stack 100]

decodes the sentences once (compiling), then again under ``perf record`` as ``minismt decode`` does (the
1-best alone), and prints each function's share of the samples of this process. Needs ``perf`` and
permission to record this process (``kernel.perf_event_paranoid`` <= 2).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROFILED_MODULES = ("minismt.decode._kernels", "minismt.decode._options_kernels", "minismt.lm._kernels",
                    "minismt._primitives", "minismt.extract._kernels")
RUNTIME_FUNCTIONS = ("NRT_incref", "NRT_decref")


def jit_functions(modules=PROFILED_MODULES) -> list[tuple[int, str]]:
    """(entry address, name) of every compiled function of ``modules``' numba dispatchers, as linked
    into each compiled kernel (a callee linked into two kernels has two entries), sorted by address."""
    import importlib

    from numba.core.registry import CPUDispatcher
    names: dict[str, str] = {name: name for name in RUNTIME_FUNCTIONS}
    libraries = []
    for module_name in modules:
        module = importlib.import_module(module_name)
        for attribute, value in vars(module).items():
            if isinstance(value, CPUDispatcher):
                for compiled in value.overloads.values():
                    names[compiled.fndesc.llvm_func_name] = attribute
                    libraries.append(compiled.library)
    entries = set()
    for library in libraries:
        for symbol, name in names.items():
            try:
                address = library.get_pointer_to_function(symbol)
            except Exception:  # not linked into this library
                continue
            if address:
                entries.add((address, name))
    return sorted(entries)


def write_perf_map(entries: list[tuple[int, str]], path: Path) -> None:
    """perf's map of JIT code: ``START SIZE NAME`` in hex, each function up to the next entry."""
    ends = [address for address, _ in entries[1:]] + [entries[-1][0] + 0x10000] if entries else []
    path.write_text("".join(f"{start:x} {end - start:x} {name}\n" for (start, name), end in zip(entries, ends)))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="a phrase-based model folder (minismt train)")
    parser.add_argument("--input", required=True, help="tokenised source sentences, one per line")
    parser.add_argument("--sentences", type=int, default=300)
    parser.add_argument("--stack", type=int, default=100)
    parser.add_argument("--top", type=int, default=15, help="how many functions to print")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["NUMBA_CACHE_DIR"] = tmp  # before numba is imported: compile everything, callees too
        from minismt.decode import Decoder
        from minismt.io import read_lines
        lines = read_lines(args.input)[:args.sentences]
        decoder = Decoder(args.model, stack_size=args.stack)
        for line in lines:
            decoder.decode(line, graph=False)
        entries = jit_functions()
        write_perf_map(entries, Path(f"/tmp/perf-{os.getpid()}.map"))
        data = Path(tmp) / "perf.data"
        perf = subprocess.Popen(["perf", "record", "-F", "2000", "-o", str(data), "-p", str(os.getpid())],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)
        began = time.perf_counter()
        for line in lines:
            decoder.decode(line, graph=False)
        seconds = time.perf_counter() - began
        perf.send_signal(2)
        perf.wait()
        report = subprocess.run(["perf", "report", "-i", str(data), "--no-children", "--sort", "sym", "--stdio",
                                 "-q"], capture_output=True, text=True)
        os.remove(f"/tmp/perf-{os.getpid()}.map")
    if report.returncode or not report.stdout.strip():
        print(f"perf gave no report: {report.stderr.strip()[:300]}", file=sys.stderr)
        return 1
    words = sum(len(line.split()) for line in lines)
    print(f"{len(lines)} sentences, {words / seconds:.0f} words/s under perf; "
          f"{len(entries)} compiled functions mapped; share of this process' samples:")
    rows = [line.strip() for line in report.stdout.splitlines() if "%" in line]
    print("\n".join(rows[:args.top]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
