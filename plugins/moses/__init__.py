"""Moses formats: n-best lists, extractor features.dat/scores.dat, moses.ini weights."""
