"""Configuration dataclasses of the IVPT and VPT-Deep models (saved in ``config.json``)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class IVPTConfig:
    """Architecture of an IVPT model.

    ``n_pro`` lists the prototype count of each stage: stage ``i < L`` feeds prompted block ``i`` of
    the last ``L = len(n_pro) - 1`` blocks, the last stage makes the final part maps. The last
    prototype of every stage is background, so there are ``K = n_pro[-1] - 1`` final parts and
    ``K`` prompt tokens per prompted block.
    """

    n_pro: list[int] = field(default_factory=lambda: [17, 14, 11, 8, 5])
    gumbel: bool = True  # soft gumbel-softmax grouping in training (plain softmax in eval)
    gumbel_tau: float = 1.0
    prototype_init_std: float = 0.05
    tune_embeddings: bool = False  # also train cls/register tokens and the position embedding
    center_features: bool = False  # maps from features minus their per-image mean (not in the reference)

    @property
    def prompted_layers(self) -> int:
        return len(self.n_pro) - 1

    @property
    def num_parts(self) -> int:
        return self.n_pro[-1] - 1

    def validate(self) -> None:
        from .backbone import PromptConfigError

        if len(self.n_pro) < 2:
            raise PromptConfigError(f"n_pro={self.n_pro}: give at least two stages (one prompted layer + the final "
                                    "parts), e.g. [17, 14, 11, 8, 5].")
        if any(int(n) < 3 for n in self.n_pro):
            raise PromptConfigError(f"n_pro={self.n_pro}: every stage needs >= 3 prototypes (>= 2 foreground + "
                                    "background).")
        if self.gumbel_tau <= 0:
            raise PromptConfigError(f"gumbel_tau must be > 0, got {self.gumbel_tau}.")


@dataclass
class VPTConfig:
    """Architecture of a VPT-Deep model: ``num_prompts`` learned tokens at each of the last
    ``prompt_layers`` blocks (0 = every block, the usual VPT-Deep)."""

    num_prompts: int = 10
    prompt_layers: int = 0
    prompt_dropout: float = 0.0

    def validate(self) -> None:
        from .backbone import PromptConfigError

        if self.num_prompts < 1:
            raise PromptConfigError(f"num_prompts must be >= 1, got {self.num_prompts}.")
        if not 0.0 <= self.prompt_dropout < 1.0:
            raise PromptConfigError(f"prompt_dropout must lie in [0, 1), got {self.prompt_dropout}.")
