"""Corpora: the synthetic language pair with true alignments (:mod:`corpora.synthetic`), the
registry of real corpora (:mod:`corpora.registry`), fetching and preparing them
(:mod:`corpora.fetch`) and the ``minismt corpora`` command (:mod:`corpora.cli`)."""
