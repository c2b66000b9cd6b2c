"""cdec formats: k-best lists and weights files."""
