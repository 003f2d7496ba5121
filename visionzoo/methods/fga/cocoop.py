"""``cocoop_<open_clip name>``: CoCoOp (Zhou et al., CVPR 2022), conditional prompt learning.

CoOp's shared context ``ctx`` ``[n_ctx, D]`` plus a Meta-Net ``π`` of the (normalised) image feature
``f`` ``[E]``: ``Linear(E, E // 16) -> ReLU -> Linear(E // 16, D)``. Its output is added to every
context vector, so each image gets its own class prompts ``[SOT] ctx_1+π(f) .. ctx_n+π(f) <name>.``
and its own text features ``[C, E]``; a batch of ``B`` images has text features ``[B, C, E]``. Only
``ctx`` and the Meta-Net train; the prompt assembly is :class:`~.model.PromptCLIP`'s.

Meta-Net init (``meta_init``): ``"zero"`` (default) zeroes its last Linear, so the untrained model
is exactly the init prompt (zero-shot CLIP with "a photo of a", where CoOp starts too) and the shift
grows from 0; ``"torch"`` keeps PyTorch's default init, as the official code does. With the default
init the last bias alone shifts every context entry by about ±1/sqrt(hidden) — 0.2 on the tiny CLIP,
ten times its token embeddings (std 0.02) — which buries the init phrase before training starts.

Cost: the text encoder runs ``B × C`` prompts per batch instead of ``C`` (CoOp) — per image, not once
per class set. :attr:`CoCoOpCLIP.text_chunk` bounds how many prompts go through the encoder at once
(less peak memory at inference; during training autograd keeps every chunk's activations, so the
batch size is what bounds training memory, which is why the paper trains with batch 1).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import Tensor, nn

from ...errors import VisionZooError
from ...registry import register_family
from .backbone import TINY_CLIP
from .config import DEFAULT_CTX_INIT, PromptConfig
from .model import PromptCLIP
from .text import encode_embeddings, text_tower

META_RATIO = 16      # the Meta-Net's bottleneck: hidden width = E // 16 (the paper's)
META_INITS = ("zero", "torch")
TEXT_CHUNK = 1024    # prompts per text-encoder call (ViT-B/16 text tower, no grad: about 0.7 GB of MLP activations)


@dataclass
class CoCoOpConfig(PromptConfig):
    """:class:`~.config.PromptConfig` plus the Meta-Net's hidden width (``E // meta_ratio``)."""

    method: str = "cocoop"
    meta_hidden: int = 0
    meta_init: str = "zero"


class MetaNet(nn.Sequential):
    """``π``: image features ``[B, E]`` -> context shifts ``[B, D]`` (Linear -> ReLU -> Linear)."""

    def __init__(self, feat_dim: int, hidden: int, ctx_dim: int):
        super().__init__(nn.Linear(feat_dim, hidden), nn.ReLU(inplace=True), nn.Linear(hidden, ctx_dim))


@dataclass
class ConditionalPrompt:
    """What a CoCoOp prediction needs besides the frozen CLIP: the context and the Meta-Net."""

    ctx: Tensor
    meta_net: nn.Module


def image_feature_dim(clip: nn.Module) -> int:
    """Width ``E`` of CLIP's joint embedding (what ``encode_image`` returns)."""
    dim = getattr(getattr(clip, "visual", None), "output_dim", None)
    if dim:
        return int(dim)
    proj = text_tower(clip).text_projection
    return int(proj.out_features if isinstance(proj, nn.Linear) else proj.shape[-1])


def conditional_text_features(model: PromptCLIP, prompt: ConditionalPrompt, image_features: Tensor,
                              normalize: bool = True, chunk: int | None = TEXT_CHUNK) -> Tensor:
    """Per-image class text features ``[B, C, E]`` of image features ``[B, E]``.

    Uses ``model``'s text tower and class prompts (its ``class_names``) with the context
    ``prompt.ctx + prompt.meta_net(f_b)`` for image ``b``. ``chunk``: prompts per encoder call
    (whole images are grouped; an image's ``C`` prompts are split when ``C > chunk``).
    """
    shift = prompt.meta_net(image_features.to(prompt.ctx.dtype))          # [B, D]
    ctxs = prompt.ctx.unsqueeze(0) + shift.unsqueeze(1)                    # [B, n_ctx, D]
    ids = model._ids()
    C, B = ids.shape[0], ctxs.shape[0]
    chunk = chunk or B * C
    if chunk < C:  # one image at a time, its classes in chunks
        return torch.stack([model.text_features(c, normalize, chunk) for c in ctxs])
    per = max(1, chunk // C)
    out = []
    for i in range(0, B, per):
        part = ctxs[i:i + per]
        x = torch.cat([model.prompt_embeddings(c) for c in part])         # [k*C, L, D]
        out.append(encode_embeddings(model.clip, x, ids.repeat(len(part), 1), normalize).view(len(part), C, -1))
    return torch.cat(out)


def conditional_logits(model: PromptCLIP, image_features: Tensor, text_features: Tensor) -> Tensor:
    """``τ · f_b · t_{b,c}`` (+ CLIP's logit bias): ``[B, E]`` x ``[B, C, E]`` -> ``[B, C]``."""
    out = model.logit_scale() * torch.einsum("be,bce->bc", image_features.to(text_features.dtype), text_features)
    bias = getattr(model.clip, "logit_bias", None)
    return out + bias if bias is not None else out


class CoCoOpCLIP(PromptCLIP):
    """A frozen open_clip model with CoCoOp's shared context and Meta-Net.

    Args: those of :class:`~.model.PromptCLIP` (``class_specific`` must stay False: CoCoOp's
    context is shared, the per-image shift makes it instance-specific); ``meta_ratio``: the
    Meta-Net's hidden width is ``E // meta_ratio`` (at least 1); ``meta_init``: ``"zero"`` or
    ``"torch"`` (see the module docstring).
    """

    def __init__(self, backbone: str, class_names: Sequence[str] | None = None, n_ctx: int | None = None,
                 ctx_init: str = DEFAULT_CTX_INIT, class_specific: bool = False, suffix: str = ".",
                 backbone_pretrained: bool | str = False, open_clip_kwargs: dict[str, Any] | None = None,
                 meta_ratio: int = META_RATIO, meta_init: str = "zero"):
        if class_specific:
            raise VisionZooError("class_specific=True is CoOp's class-specific context (CSC), not CoCoOp: CoCoOp "
                                 "shares one context over all classes and makes it image-specific with the "
                                 "Meta-Net. Use coop_<name> --class-specific for CSC, or drop class_specific.")
        if not isinstance(meta_ratio, int) or meta_ratio < 1:
            raise VisionZooError(f"meta_ratio must be a positive integer (hidden width = E // meta_ratio), "
                                 f"got {meta_ratio!r}.")
        if meta_init not in META_INITS:
            raise VisionZooError(f"meta_init must be one of {', '.join(META_INITS)}, got {meta_init!r}.")
        super().__init__(backbone, class_names, n_ctx=n_ctx, ctx_init=ctx_init, class_specific=False, suffix=suffix,
                         backbone_pretrained=backbone_pretrained, method="cocoop", open_clip_kwargs=open_clip_kwargs)
        feat_dim = image_feature_dim(self.clip)
        hidden = max(1, feat_dim // meta_ratio)
        self.config = CoCoOpConfig(**{**asdict(self.config), "method": "cocoop"}, meta_hidden=hidden,
                                   meta_init=meta_init)
        self.meta_net = MetaNet(feat_dim, hidden, self.embed_dim).to(self.ctx.device)
        if meta_init == "zero":
            nn.init.zeros_(self.meta_net[2].weight)
            nn.init.zeros_(self.meta_net[2].bias)
        self.text_chunk: int | None = TEXT_CHUNK  # runtime setting, not saved

    def conditional_prompt(self) -> ConditionalPrompt:
        """A detached copy of the context and the Meta-Net (for predictors that must not change the model)."""
        net = copy.deepcopy(self.meta_net).eval().requires_grad_(False)
        return ConditionalPrompt(self.ctx.detach().clone(), net)

    def conditional_text_features(self, image_features: Tensor, normalize: bool = True) -> Tensor:
        """Per-image class text features ``[B, C, E]`` of image features ``[B, E]`` (gradients reach
        ``ctx`` and the Meta-Net). :meth:`text_features` is the unconditioned prompt (``π = 0``)."""
        return conditional_text_features(self, ConditionalPrompt(self.ctx, self.meta_net), image_features,
                                         normalize, self.text_chunk)

    def forward(self, images: Tensor | None = None, image_features: Tensor | None = None) -> Tensor:
        """Logits ``[B, C]`` of normalised images ``[B, 3, H, W]`` or their features ``[B, E]``."""
        if image_features is None:
            if images is None:
                raise VisionZooError("CoCoOpCLIP.forward needs images or image_features.")
            image_features = self.encode_image(images)
        return conditional_logits(self, image_features, self.conditional_text_features(image_features))


def _build(backbone: str, **kwargs: Any) -> CoCoOpCLIP:
    kwargs.pop("method", None)
    return CoCoOpCLIP(backbone, **kwargs)


register_family("cocoop", default_backbones=[TINY_CLIP, "ViT-B-16", "ViT-B-16-quickgelu"],
                backbone_check=lambda name: True)(_build)
