"""Corpora: the synthetic corpus generator and the registry of real corpora."""
