"""Moses formats: n-best lists, moses.ini weights, and the tuning files (:mod:`plugins.moses.mertfiles`):
extractor's features.dat/scores.dat, mert's init.opt, kbmira's weights file."""
