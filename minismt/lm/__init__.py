"""n-gram language models: lmplz-exact modified Kneser-Ney estimation, ARPA files, KenLM-exact queries.

* :func:`estimate_kn` estimates an interpolated modified Kneser-Ney model as
  KenLM's ``lmplz`` does (Chen & Goodman 1998; Heafield et al. 2013) and returns
  an :class:`ArpaModel` (word-id arrays, log10 probabilities and back-offs per order);
* :func:`write_arpa` / :func:`read_arpa` write and read the ARPA format (gzip by suffix);
* :class:`LanguageModel` answers queries with KenLM's semantics through a numba
  hash table whose arrays (``LanguageModel.tables``) the decoder's kernels take.

Example::

    model = estimate_kn(Path("train.tok.en"), order=4)
    write_arpa(model, "lm.arpa.gz")
    lm = LanguageModel.from_arpa("lm.arpa.gz")       # or LanguageModel.from_model(model)
    lm.score("a man is outside .")                   # total log10 probability with <s> ... </s>
"""

from minismt.lm.arpa import ArpaModel, read_arpa, write_arpa
from minismt.lm.estimate import LMPLZ_DISCOUNT_FALLBACK, estimate_kn
from minismt.lm.query import LanguageModel, State

__all__ = ["ArpaModel", "LMPLZ_DISCOUNT_FALLBACK", "LanguageModel", "State", "estimate_kn", "read_arpa",
           "write_arpa"]
