"""minismt: tuning of statistical machine translation weights, and a small SMT engine.

The data types every tuner reads live here: :class:`~minismt.features.FeatureSpace`,
:class:`~minismt.kbest.KBest` and the BLEU statistics of :mod:`minismt.metrics`.
"""

from minismt.errors import InputError

__version__ = "0.1.0"

__all__ = ["InputError", "__version__"]
