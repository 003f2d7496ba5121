"""IVPT (interpretable visual prompt tuning) and its VPT-Deep baseline on timm ViTs.

Architectures ``ivpt_<timm vit>`` and ``vpt_deep_<timm vit>``; tasks ``ivpt`` and ``vpt`` for
``train.py`` / ``eval.py``; the EvalProtoPNet consistency/stability metrics
(:mod:`.interp_metrics`); part-map figures (:mod:`.visualize`); ``demo.run_demo``.
"""

from . import model, task, vpt  # noqa: F401
from .config import IVPTConfig, VPTConfig
from .model import IVPT, IVPTOutput
from .vpt import VPTDeep

__all__ = ["IVPT", "IVPTOutput", "IVPTConfig", "VPTDeep", "VPTConfig"]
