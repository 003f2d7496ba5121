"""The frozen timm ViT under IVPT and VPT-Deep: checks, token layout and the prompted-block wrapper.

Any timm ``VisionTransformer`` works: class token or not, register tokens (``num_prefix_tokens``
counts both), any patch and image size. Prompted blocks are *wrapped*: :class:`PromptedBlock`
holds the original block and calls it, unchanged, on ``[tokens; prompts]``; the prompts are
dropped again after the block (VPT-deep style: fresh prompts at every prompted block). The
block's own attention runs as is, so q/k/v are computed once per block.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Any

import timm
import torch
from timm.models.vision_transformer import VisionTransformer
from torch import Tensor, nn

from ...backbones import create_timm_backbone
from ...errors import VisionZooError

VIT_EXAMPLES = ("vit_small_patch16_224", "vit_base_patch14_reg4_dinov2", "deit_small_patch16_224",
                "vit_base_patch16_clip_224", "vit_tiny_partworld")


class PromptConfigError(VisionZooError, ValueError):
    """An IVPT / VPT-Deep model cannot be built as asked (wrong backbone, sizes, layer counts)."""


class PromptedBlock(nn.Module):
    """Holds one original timm block; ``forward(x, prompts)`` runs it on ``[x; prompts]``.

    ``x`` [B, N, D] (prefix + patch tokens), ``prompts`` [B, P, D] or None -> [B, N, D].
    """

    def __init__(self, block: nn.Module):
        super().__init__()
        self.block = block

    def forward(self, x: Tensor, prompts: Tensor | None = None) -> Tensor:
        if prompts is None:
            return self.block(x)
        n = x.shape[1]
        return self.block(torch.cat([x, prompts.to(x.dtype)], dim=1))[:, :n]


def check_vit_config(backbone: str, prompted_layers: int, **timm_kwargs: Any) -> None:
    """Raise :class:`PromptConfigError` before any weights are fetched if ``backbone`` cannot host prompts.

    The architecture is built on the ``meta`` device (no memory, no download) to read its class,
    depth, patch size and image size.
    """
    if timm_kwargs.get("dynamic_img_size"):
        raise PromptConfigError("dynamic_img_size=True is not supported: prototype spatial biases have the "
                                "backbone's fixed token grid. Build the model at the image size you use "
                                "(img_size=...).")
    with torch.device("meta"):
        probe = timm.create_model(backbone, pretrained=False, num_classes=0, **timm_kwargs)
    if not isinstance(probe, VisionTransformer):
        raise PromptConfigError(
            f"{backbone!r} builds a {type(probe).__name__}, not a timm VisionTransformer; prompt tuning needs a "
            f"ViT token sequence. Use a ViT backbone, e.g. {', '.join(VIT_EXAMPLES)}.")
    depth = len(probe.blocks)
    if not 1 <= prompted_layers <= depth:
        raise PromptConfigError(f"{prompted_layers} prompted layers asked for, but {backbone!r} has {depth} blocks; "
                                f"use 1..{depth} (IVPT: len(n_pro) - 1 prompted layers).")
    img, patch = tuple(probe.patch_embed.img_size), tuple(probe.patch_embed.patch_size)
    if any(i % p for i, p in zip(img, patch, strict=True)):
        raise PromptConfigError(f"image size {img[0]}x{img[1]} is not divisible by the patch size {patch[0]}x{patch[1]} "
                                f"of {backbone!r}; pick img_size as a multiple of the patch size (e.g. "
                                f"{(img[0] // patch[0]) * patch[0]}).")


def _resolve_pretrained(backbone: str, pretrained: bool | str | os.PathLike) -> tuple[bool | str, str | None]:
    """``True`` for a timm model whose pretrained cfg names a local ``file`` (the project's own
    backbones) -> that file; the second value is the source to record (None: as given)."""
    if pretrained is True:
        cfg = timm.models.get_pretrained_cfg(backbone)
        if cfg is not None and cfg.file and not (cfg.hf_hub_id or cfg.url):
            if not os.path.exists(cfg.file):
                raise PromptConfigError(f"the weights of {backbone!r} are not there: {cfg.file} is missing. "
                                        "Pass backbone_pretrained=<weights file> or False.")
            return str(cfg.file), f"timm:{backbone}"
    return pretrained, None


def build_frozen_vit(backbone: str, pretrained: bool | str | os.PathLike, prompted_layers: int,
                     **timm_kwargs: Any) -> tuple[VisionTransformer, str | None]:
    """The frozen ViT (no head) and its weight source (None for random weights)."""
    check_vit_config(backbone, prompted_layers, **timm_kwargs)
    spec, recorded = _resolve_pretrained(backbone, pretrained)
    vit, source = create_timm_backbone(backbone, spec, num_classes=0, **timm_kwargs)
    for p in vit.parameters():
        p.requires_grad_(False)
    return vit, (recorded or source)


def wrap_last_blocks(vit: VisionTransformer, count: int) -> list[int]:
    """Replace the last ``count`` blocks by :class:`PromptedBlock` wrappers; returns their indices."""
    depth = len(vit.blocks)
    idx = list(range(depth - count, depth))
    for i in idx:
        if not isinstance(vit.blocks[i], PromptedBlock):
            vit.blocks[i] = PromptedBlock(vit.blocks[i])
    return idx


def grid_of(vit: VisionTransformer) -> tuple[int, int]:
    """Token grid ``(H, W)`` of the backbone's built image size."""
    return tuple(int(g) for g in vit.patch_embed.grid_size)  # type: ignore[return-value]


def final_norm(vit: VisionTransformer) -> nn.Module:
    """The backbone's last norm: ``norm``, or ``fc_norm`` for ViTs that pool before normalising."""
    if isinstance(vit.norm, nn.Identity) and not isinstance(vit.fc_norm, nn.Identity):
        return vit.fc_norm
    return vit.norm


def embed(vit: VisionTransformer, images: Tensor) -> Tensor:
    """Images [B, 3, H, W] -> tokens [B, prefix + HW, D] (patch embed, positions, prefix tokens, norm_pre)."""
    expected = tuple(vit.patch_embed.img_size)
    if tuple(images.shape[-2:]) != expected:
        raise PromptConfigError(f"input is {images.shape[-2]}x{images.shape[-1]} but the model was built for "
                                f"{expected[0]}x{expected[1]}; resize the images (create_transforms(model)).")
    x = vit.patch_embed(images)
    x = vit._pos_embed(x)
    x = vit.patch_drop(x)
    return vit.norm_pre(x)


def patch_grid(tokens: Tensor, num_prefix: int, grid: tuple[int, int]) -> Tensor:
    """Patch tokens of [B, N, D] as a feature map [B, D, H, W]."""
    b, _, d = tokens.shape
    return tokens[:, num_prefix:num_prefix + grid[0] * grid[1]].transpose(1, 2).reshape(b, d, *grid)


class FrozenViTMixin:
    """Shared by IVPT and VPT-Deep: keep the frozen backbone in eval mode, and load weights files."""

    backbone: VisionTransformer
    prompted_idx: list[int]

    def train(self, mode: bool = True):  # type: ignore[override]
        super().train(mode)  # type: ignore[misc]
        self.backbone.eval()  # frozen: no dropout / drop-path noise from the backbone
        return self

    def load_pretrained_weights(self, state: dict[str, Tensor]) -> None:
        """Load a visionzoo state dict (all tensors or only the trained ones), or a plain timm
        backbone state dict (e.g. a card whose weights are the hub backbone's)."""
        from ...checkpoint import load_state_into

        own = set(self.state_dict())  # type: ignore[attr-defined]
        if set(state) <= own or any(k.startswith("backbone.") for k in state):  # a visionzoo state dict
            mode = "full" if own <= set(state) else "trained"
            load_state_into(self, state, mode, where="weights file")  # type: ignore[arg-type]
            return
        from timm.models.vision_transformer import checkpoint_filter_fn

        filtered = checkpoint_filter_fn(state, self.backbone)
        wrapped = {f"blocks.{i}." for i in self.prompted_idx}
        remapped = {}
        for k, v in filtered.items():
            if k.startswith(("head.", "fc_norm.")) and k not in self.backbone.state_dict():
                continue
            pre = next((w for w in wrapped if k.startswith(w)), None)
            remapped[k if pre is None else pre + "block." + k[len(pre):]] = v
        missing, unexpected = self.backbone.load_state_dict(remapped, strict=False)
        if missing or unexpected:
            raise VisionZooError(f"backbone weights do not fit {type(self.backbone).__name__}: missing "
                                 f"{missing[:3]}, unexpected {unexpected[:3]}.")


@contextmanager
def record_attention(blocks: list[nn.Module], rows: int):
    """Record the attention of the last ``rows`` tokens (the prompts) of each block in ``blocks``.

    Hooks read q and k where the block computes them (after ``q_norm``/``k_norm``), so nothing is
    recomputed by the model; the softmax over keys is formed here, only while recording. Yields a
    list that receives, per block call, attention [B, heads, rows, N] (float32).
    """
    out: list[Tensor] = []
    handles = []
    for blk in blocks:
        attn = getattr(blk, "attn", None)
        if attn is None or not hasattr(attn, "q_norm") or not hasattr(attn, "k_norm"):
            raise PromptConfigError(f"cannot record attention of {type(blk).__name__}: it has no timm Attention "
                                    "with q_norm/k_norm.")
        store: dict[str, Tensor] = {}

        def keep_q(_m, _inp, q, store=store):
            store["q"] = q

        def keep_k(_m, _inp, k, store=store, scale=float(attn.scale)):
            q = store.pop("q")[:, :, -rows:].float()
            out.append(((q @ k.float().transpose(-2, -1)) * scale).softmax(-1))

        handles += [attn.q_norm.register_forward_hook(keep_q), attn.k_norm.register_forward_hook(keep_k)]
    try:
        yield out
    finally:
        for h in handles:
            h.remove()
