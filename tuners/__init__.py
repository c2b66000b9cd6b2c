"""Tuners: every weight-tuning method behind one interface, and the outer tuning loop.

Importing this package registers every tuner in :data:`tuners.base.REGISTRY`.
"""

from tuners.base import REGISTRY, Tuner, TunerTags, get_tuner, register
from tuners import apro, kbmira, listwise, mert, oro, pro, structsvm  # noqa: E402,F401  (importing registers each tuner)
from tuners import hgmert  # noqa: E402,F401  (hypergraph MERT, registered as "hg-mert")
from tuners import minrisk  # noqa: E402,F401  (minimum risk on k-best lists and forests: "minrisk", "hg-minrisk")
from tuners import mira  # noqa: E402,F401  (online hope/fear MIRA: "mira")
from tuners import rampion  # noqa: E402,F401  (structured ramp loss by CCCP: "rampion")
from tuners import dtrain  # noqa: E402,F401  (sharded pairwise SGD with feature selection: "dtrain")
from tuners import bayesopt  # noqa: E402,F401  (NBL-BO, HG-BO, CHG-BO, HG-REMBO)

__all__ = ["REGISTRY", "Tuner", "TunerTags", "get_tuner", "register"]
