"""The ``minismt`` command: one subcommand per job, each with a --help that explains it."""

from __future__ import annotations

import argparse
import json
import sys

from minismt import __version__
from minismt.errors import InputError


def _eval_command(args) -> int:
    from minismt.metrics.evaluate import evaluate_files
    result = evaluate_files(args.hyp, args.ref, lowercase=args.lowercase, tokenize=args.tokenize)
    if args.json:
        print(json.dumps(result, sort_keys=True))
    else:
        print(f"BLEU  {result['bleu']:.2f}  "
              f"({'/'.join(f'{p:.1f}' for p in result['bleu_precisions'])}, "
              f"BP {result['bleu_bp']:.3f}, hyp {result['sys_len']}, ref {result['ref_len']})")
        print(f"chrF2 {result['chrf']:.2f}")
        print(f"TER   {result['ter']:.2f}")
        print(f"signature: {result['signature']}")
    return 0


def _add_eval(sub) -> None:
    p = sub.add_parser(
        "eval", help="corpus BLEU, chrF and TER of a hypothesis file (sacrebleu)",
        description="Score a hypothesis file (one sentence per line, plain or gzipped) against "
                    "one or more reference files with sacrebleu's defaults: BLEU (13a tokenizer, "
                    "exp smoothing), chrF2 and TER. The numbers are identical to the sacrebleu "
                    "command line's; the signature names every setting.")
    p.add_argument("--hyp", required=True, metavar="FILE", help="hypothesis file, one line per sentence")
    p.add_argument("--ref", required=True, action="append", metavar="FILE",
                   help="reference file with the same number of lines; repeat for several references")
    p.add_argument("--lowercase", action="store_true",
                   help="case-insensitive BLEU and chrF (sacrebleu -lc; TER is case-insensitive anyway)")
    p.add_argument("--tokenize", default=None, metavar="NAME",
                   help="BLEU tokenizer: 13a (default), none (for tokenised text, as in tuning), "
                        "intl, char, ...")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object (keys bleu, chrf, ter, signature, ...) as the last line")
    p.set_defaults(run=_eval_command)


def _extract_command(args) -> int:
    from plugins.moses.extractor import extract
    kbest = extract(args.nbest, args.ref, args.ffile, args.scfile, fmt=args.format,
                    lowercase=args.lowercase, dedup=not args.no_dedup)
    print(f"extracted {kbest.n_hypotheses} hypotheses of {kbest.n_instances} sentences, "
          f"{kbest.space.n_dense} dense and {len(kbest.space) - kbest.space.n_dense} sparse features",
          file=sys.stderr)
    return 0


def _add_extract(sub) -> None:
    p = sub.add_parser(
        "extract", help="n-best list + references -> Moses features.dat and scores.dat",
        description="Do what Moses' 'extractor --sctype BLEU' does: read an n-best list (Moses, "
                    "or cdec with --format cdec), compute the 9 BLEU statistics of every "
                    "hypothesis against the references (clipped matches and n-gram counts for "
                    "n=1..4, closest reference length), and write features.dat and scores.dat, "
                    "which Moses' mert, kbmira and pro and minismt's tuners read.")
    p.add_argument("--nbest", required=True, metavar="FILE", help="n-best list (plain or gzipped)")
    p.add_argument("--ref", required=True, action="append", metavar="FILE",
                   help="reference file, one line per sentence; repeat for several references")
    p.add_argument("--ffile", required=True, metavar="FILE", help="features.dat to write")
    p.add_argument("--scfile", required=True, metavar="FILE", help="scores.dat to write")
    p.add_argument("--format", choices=["moses", "cdec"], default="moses",
                   help="n-best format (default moses; cdec: every feature name becomes dense)")
    p.add_argument("--lowercase", action="store_true", help="case-insensitive statistics")
    p.add_argument("--no-dedup", action="store_true",
                   help="keep repeated hypotheses (same string and features) of a sentence")
    p.set_defaults(run=_extract_command)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="minismt",
        description="minismt: tune statistical machine translation weights (MERT, PRO, APRO, "
                    "k-best MIRA, ranking and hypergraph tuners) and evaluate translations. "
                    "Run 'minismt COMMAND --help' for each command.")
    parser.add_argument("--version", action="version", version=f"minismt {__version__}")
    sub = parser.add_subparsers(title="commands", metavar="COMMAND")
    for add in COMMANDS:
        add(sub)
    return parser


COMMANDS = [_add_eval, _add_extract]


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):
        parser.print_help()
        return 0
    try:
        return args.run(args)
    except InputError as err:
        print(f"minismt: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("minismt: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
