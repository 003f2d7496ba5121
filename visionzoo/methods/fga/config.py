"""Configuration of the prompt model (saved in a checkpoint's config.json) and FGA's defaults."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_CTX_INIT = "a photo of a"
DEFAULT_TEMPLATE = "a photo of a {}."
RANDOM_CTX_TOKENS = 16   # CoOp's context length when no init phrase is given
PLACEHOLDER = "X"        # token that marks context positions in the tokenised prompt (as CoOp does)

# SAPT (stage 1): the paper sweeps rho over {0.05, 0.1, 0.3, 0.5, 0.7}; lambda = 1 is plain SAM.
SAPT_RHO = 0.3
# STSS (stage 2): lambda = 1 and rho' = 0.5 are the paper's; R and s are not given (see docs/fga.md).
STSS_RHO = 0.5
STSS_LAMBDA = 1.0
STSS_R = 8
STSS_KEEP = 6
# Baselines (TPT: 10 % lowest-entropy views, one AdamW step, lr 5e-3; Zero: 30 % most confident views).
TPT_LR = 5e-3
TPT_STEPS = 1
TPT_KEEP = 0.1
ZERO_KEEP = 0.3
N_VIEWS = 64


@dataclass
class PromptConfig:
    """How the prompt is built: ``[SOT] ctx_1 .. ctx_n <class name><suffix> [EOT]``.

    Attributes:
        method: ``"coop"`` or ``"fga"`` (the family the model was built as; same architecture).
        n_ctx: number of context vectors.
        ctx_init: phrase whose token embeddings initialise the context ("" = random, N(0, 0.02²)).
        class_specific: one context per class (CoOp's CSC) instead of one shared context.
        suffix: text after the class name.
    """

    method: str = "coop"
    n_ctx: int = 4
    ctx_init: str = DEFAULT_CTX_INIT
    class_specific: bool = False
    suffix: str = "."
