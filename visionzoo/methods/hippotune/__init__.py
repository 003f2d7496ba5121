"""HippoTune: iterative latent retrieval layers for class-incremental learning, with its protocol,
metrics and baselines (spec: specs/hippotune.md; guide and measurements: docs/hippotune.md).

Architectures: ``hippotune_<timm vit>`` (:class:`HippoTuneViT`), and the baselines
``simplecil_<vit>``, ``seqhead_<vit>``, ``l2p_<vit>``, ``coda_<vit>`` (CODA-Prompt). Tasks
(``train.py``/``eval.py``): ``hippotune``, ``l2p``, ``coda``, ``seqhead``, ``simplecil``, ``joint``.
"""

from . import baselines, coda, model, tasks  # noqa: F401
from .baselines import L2PViT, LinearHeadViT, SimpleCILViT
from .coda import CodaPromptViT
from .config import CodaPromptModelConfig, ContinualConfig, HippoTuneModelConfig, L2PModelConfig
from .flops import inference_flops, training_flops
from .layer import RetrievalBlock
from .metrics import cl_metrics, forgetting
from .model import HippoTuneViT
from .prefix import PrefixBlock
from .protocol import SplitError, build_protocol, make_scenario, split_sizes
from .retrieval import IterativeRetrieval, Retrieved

__all__ = [
    "HippoTuneViT", "IterativeRetrieval", "Retrieved", "RetrievalBlock", "HippoTuneModelConfig",
    "L2PViT", "LinearHeadViT", "SimpleCILViT", "L2PModelConfig", "ContinualConfig",
    "CodaPromptViT", "CodaPromptModelConfig", "PrefixBlock",
    "cl_metrics", "forgetting", "training_flops", "inference_flops",
    "SplitError", "build_protocol", "make_scenario", "split_sizes",
]
