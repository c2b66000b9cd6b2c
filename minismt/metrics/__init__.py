"""Metrics for tuning and evaluation: BLEU statistics, corpus BLEU, sentence BLEU+1.

See :mod:`minismt.metrics.bleu` for the statistics layout and the variants, and
:mod:`minismt.metrics.evaluate` for the sacrebleu BLEU/chrF/TER report of a file.
"""

from minismt.metrics.bleu import (HYP_LEN, MATCHES, MAX_ORDER, N_STATS, REF_LEN, TOTALS,
                                  BleuReferences, bleu_plus_one, corpus_bleu,
                                  corpus_bleu_from_stats, length_ratio, sentence_bleu, tokenize)

__all__ = ["HYP_LEN", "MATCHES", "MAX_ORDER", "N_STATS", "REF_LEN", "TOTALS", "BleuReferences",
           "bleu_plus_one", "corpus_bleu", "corpus_bleu_from_stats", "length_ratio", "sentence_bleu", "tokenize"]
