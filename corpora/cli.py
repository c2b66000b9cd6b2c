"""``minismt corpora``: generate the synthetic corpus, fetch and prepare real ones, list them.

``minismt --help`` imports this module: the commands import :mod:`corpora.synthetic` and
:mod:`corpora.fetch` (numpy, the tokenizer's modules: 0.17 s) when they run.
"""

from __future__ import annotations

import argparse
import sys
import textwrap

from corpora import registry

FORMATTER = argparse.RawDescriptionHelpFormatter


def _text(*paragraphs: str) -> str:
    """Paragraphs filled to 78 columns; one holding a newline is kept as laid out."""
    return "\n\n".join(p if "\n" in p else textwrap.fill(p, 78) for p in paragraphs)


def _synth_command(args) -> int:
    from corpora.synthetic import write_synthetic
    manifest = write_synthetic(args.out, args.pairs, args.seed, dev=args.dev, test=args.test)
    sizes = ", ".join(f"{split} {record['src']['lines']}" for split, record in manifest["splits"].items())
    print(f"wrote synthetic corpus (seed {manifest['seed']}, {manifest['lemmas']} lemmas) to "
          f"{args.out}: {sizes} pairs")
    return 0


def _fetch_command(args) -> int:
    from corpora.fetch import fetch
    result = fetch(args.name, args.out, from_dir=args.from_dir, tokenize=not args.no_tokenize,
                   lowercase=not args.keep_case, clean=not args.no_clean,
                   progress=not args.no_progress, max_train=args.max_train, mirror=args.mirror)
    actions = result["actions"]
    print(f"{result['name']} ({result['source_language']} -> {result['target_language']}) in "
          f"{args.out}: raw files {len(actions['downloaded'])} downloaded, "
          f"{len(actions['copied'])} copied, {len(actions['kept'])} already verified; "
          f"splits prepared: {', '.join(actions['prepared']) or 'none'}; "
          f"unchanged: {', '.join(actions['reused']) or 'none'}")
    for split, record in result["splits"].items():
        line = f"  {split:9s} {record['src']['lines']:6d} pairs  {split}.src {split}.tgt"
        if record["cleaning"] is not None:
            dropped = ", ".join(f"{n} {why}" for why, n in record["cleaning"]["dropped"].items())
            line += f"  (cleaning dropped {dropped or 'none'} of {record['raw_lines']})"
        print(line)
    return 0


def _list_command(args) -> int:
    print(f"{'name':16s} {'languages':9s} {'train':>6s} {'dev':>5s} {'test':>5s} {'test2017':>8s} "
          f"{'download':>8s}")
    for name in registry.names():
        spec = registry.get(name)
        lines = {split: spec.splits[split].lines for split in registry.SPLITS}
        print(f"{name:16s} {spec.source + '-' + spec.target:9s} {lines['train']:6d} "
              f"{lines['dev']:5d} {lines['test']:5d} {lines['test2017']:8d} "
              f"{spec.download_size() / 1e6:6.1f} MB")
    return 0


def add_corpora_command(subparsers) -> None:
    """Register ``corpora`` (with ``synth``, ``fetch`` and ``list``) on an argparse subparsers object."""
    corpora = subparsers.add_parser(
        "corpora", help="synthetic corpus with true alignments; fetch and prepare Multi30k",
        formatter_class=FORMATTER,
        description=_text(
            "Parallel corpora for training and testing minismt.",
            "  synth   write a synthetic language pair with its true word alignment\n"
            "  fetch   download (or copy) a registered corpus, verify its checksums,\n"
            "          tokenise, lowercase and clean it into train/dev/test files\n"
            "  list    show the registered corpora",
            "Run 'minismt corpora COMMAND --help' for each."))
    commands = corpora.add_subparsers(title="commands", metavar="COMMAND")
    corpora.set_defaults(run=lambda args: _print_help(corpora))

    synth = commands.add_parser(
        "synth", help="write the synthetic corpus with its true alignment",
        formatter_class=FORMATTER,
        description=_text(
            "Write a deterministic toy language pair: an SOV source with case/number suffixes "
            "and postposed adjectives, an SVO target with subject-verb agreement and "
            "definiteness suffixes, compounds and particle verbs (one-to-many), article+noun "
            "-> one word (many-to-one), and words whose translation depends on a neighbour "
            "(ambiguity). About 360 lemmas; sentences of 3-20 words.",
            "Writes DIR/{train,dev,test}.{src,tgt} (tokenised, lowercase, one sentence per "
            "line), DIR/{train,dev,test}.align (the true alignment, Pharaoh 'i-j', "
            "source-target, 0-based) and DIR/corpus.json (sizes, seed, checksums). The same "
            "--pairs/--seed/--dev/--test give byte-identical files; dev and test sentences "
            "never occur in train."))
    synth.add_argument("--pairs", type=int, required=True, metavar="N", help="training pairs (>= 1)")
    synth.add_argument("--seed", type=int, default=1, metavar="S",
                       help="random seed choosing the sentences (default 1; the vocabulary "
                            "is the same for every seed)")
    synth.add_argument("--out", required=True, metavar="DIR", help="output folder (created)")
    synth.add_argument("--dev", type=int, default=None, metavar="N",
                       help="dev pairs (default min(500, pairs/10))")
    synth.add_argument("--test", type=int, default=None, metavar="N",
                       help="test pairs (default min(500, pairs/10))")
    synth.set_defaults(run=_synth_command)

    fetch = commands.add_parser(
        "fetch", help="download, verify and prepare a registered corpus",
        formatter_class=FORMATTER,
        description=_text(
            "Download every file of corpus NAME (see 'minismt corpora list') from its public "
            "address, or copy it from a local folder with --from, and verify its sha256. "
            "Files arrive under a temporary name and are renamed into DIR/raw/ only when "
            "their checksum is right: a failed or bad download is deleted and never replaces "
            "a good copy, and a file already present with the right checksum is not fetched "
            "again.",
            "Then writes DIR/{train,dev,test,test2017}.{src,tgt}: tokenised with sacremoses "
            "(Moses tokenizer.perl -no-escape) and lowercased, as the Moses reference system "
            "does. Only train is cleaned (pairs with an empty side, a side over 80 words or a "
            "length ratio above 9 are dropped, as clean-corpus-n.perl 1 80); dev (val), test "
            "(test_2016_flickr) and test2017 keep every line so that they stay aligned with "
            "their references. DIR/corpus.json records the files, checksums, line counts, "
            "cleaning report and tokenizer version; a split whose inputs and options are "
            "unchanged is not prepared again."))
    fetch.add_argument("name", metavar="NAME", help="corpus name, e.g. multi30k-de-en")
    fetch.add_argument("--out", required=True, metavar="DIR", help="output folder (created)")
    fetch.add_argument("--from", dest="from_dir", metavar="DIR", default=None,
                       help="copy the files from this folder instead of downloading them")
    fetch.add_argument("--mirror", metavar="URL", default=None,
                       help="download from this base URL (http, https or file) instead of the "
                            "registry's address; files have the registry's names")
    fetch.add_argument("--no-tokenize", action="store_true", help="keep the raw text untokenised")
    fetch.add_argument("--keep-case", action="store_true", help="do not lowercase")
    fetch.add_argument("--no-clean", action="store_true", help="keep every training pair")
    fetch.add_argument("--max-train", type=int, default=None, metavar="N",
                       help="prepare only the first N training pairs (before cleaning), for "
                            "quick experiments")
    fetch.add_argument("--no-progress", action="store_true", help="no progress bars on stderr")
    fetch.set_defaults(run=_fetch_command)

    listing = commands.add_parser(
        "list", help="show the registered corpora", formatter_class=FORMATTER,
        description=_text(
            "List every registered corpus: name, source-target languages, lines of train, "
            "dev, test and test2017, and the download size. Use a name with 'minismt corpora "
            "fetch'."))
    listing.set_defaults(run=_list_command)


def _print_help(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stdout)
    return 0
