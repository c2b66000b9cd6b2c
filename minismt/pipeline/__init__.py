"""train -> tune -> test orchestration with caching, resumable runs and reports.

- :mod:`.config`: the TOML configuration, checked strictly (:func:`load_config`, :func:`check_config`);
- :mod:`.run`: the steps, each cached in the work folder under the hash of its inputs (:class:`Pipeline`);
- :mod:`.significance`: paired bootstrap between systems (sacrebleu's implementation);
- :mod:`.report`: report.json, report.md and the figures;
- :mod:`.cli`: the ``minismt pipeline`` and ``minismt demo`` commands.
"""

from minismt.pipeline.config import PipelineConfig, check_config, load_config
from minismt.pipeline.run import Pipeline, run_pipeline

__all__ = ["Pipeline", "PipelineConfig", "check_config", "load_config", "run_pipeline"]
