"""RAM family: physics-aware, non-iterative reconstruction for linear inverse problems.

Architectures (registered): ``ram_base`` (deepinv's RAM, official weights via the model card
``ram_base.official``), ``ram_small``, ``ram_tiny``. Call a model as ``model(y, physics)``.

Modules: :mod:`.operators` (operator strings -> deepinv physics), :mod:`.selfsup`
(self-supervised fine-tuning), :mod:`.baselines` (Aᵀy, A†y, TV-PGD), :mod:`.evaluate` and
:mod:`.report` (PSNR/SSIM tables and figures); jobs: :mod:`.task` (``train.py ram``, ``train.py ram
--finetune``, ``eval.py ram``), :mod:`.demo` (``make demo``).
"""

from .checks import (
    NoiseLevelError,
    NonFiniteMeasurementError,
    OperatorShapeError,
    RAMInputError,
    UnsupportedChannelsError,
)
from .config import RAM_BASE, RAM_SMALL, RAM_TINY, RAMConfig
from .models import ram_base, ram_small, ram_tiny
from .network import RAMNet
from .operators import OPERATOR_HELP, OperatorSpec, OperatorSpecError, build_physics, parse_operator, simulate
from .selfsup import choose_losses, finetune
from .task import RAMTask, RAMTaskConfig

__all__ = [
    "RAMConfig", "RAM_BASE", "RAM_SMALL", "RAM_TINY", "RAMNet", "ram_base", "ram_small", "ram_tiny",
    "OPERATOR_HELP", "OperatorSpec", "OperatorSpecError", "build_physics", "parse_operator", "simulate",
    "choose_losses", "finetune", "RAMInputError", "UnsupportedChannelsError", "NonFiniteMeasurementError",
    "OperatorShapeError", "NoiseLevelError", "RAMTask", "RAMTaskConfig",
]
