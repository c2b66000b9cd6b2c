"""Adapters for the real Moses and cdec toolkits: file formats, decoder drivers, drop-in optimizers."""
