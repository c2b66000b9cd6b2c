"""Phrase-table training as Moses ``train-model.perl`` steps 4-7: lexical translation
tables, phrase-pair extraction (Koehn, Och & Marcu 2003), scoring (relative frequencies and
lexical weights, Moses ``score`` + ``consolidate``) and msd-bidirectional-fe lexicalised
reordering with word-based orientations (Tillmann 2004; Koehn et al. 2005).

    table = train_phrase_table(src, tgt, alignment, src_vocab, tgt_vocab)
    write_moses_phrase_table(table, "model/phrase-table.gz")
    write_moses_reordering_table(table, "model/reordering-table.wbe-msd-bidirectional-fe.gz")
    table.save("model/phrase-table")               # the folder the decoder memory-maps (".npz": one file)
    rows = PhraseTable.load("model/phrase-table").lookup(src_vocab.encode(["ein", "mann"], grow=False))

A table holds p(f|e), lex(f|e), p(e|f), lex(e|f) per phrase pair (Moses' order); the phrase
penalty is a decoder feature, not a column, as in modern Moses.
"""

from minismt.extract.lexical import LexicalTable
from minismt.extract.moses import (read_moses_tables, write_moses_phrase_table,
                                   write_moses_reordering_table)
from minismt.extract.phrase_table import COUNT_NAMES, REORDERING_NAMES, SCORE_NAMES, PhraseTable
from minismt.extract.extraction import (PhrasePairs, extract_phrase_pairs, train_lexical_table,
                                   train_phrase_table)

__all__ = [
    "COUNT_NAMES", "LexicalTable", "PhrasePairs", "PhraseTable", "REORDERING_NAMES",
    "SCORE_NAMES", "extract_phrase_pairs", "read_moses_tables", "train_lexical_table",
    "train_phrase_table", "write_moses_phrase_table", "write_moses_reordering_table",
]
