"""``PrefixBlock``: a frozen timm ViT block whose attention also reads per-image prefix keys and values.

Prefix-tuning (Li & Liang, 2021), as DualPrompt and CODA-Prompt use it: learned vectors are
prepended to the keys and values of a block's self-attention, so every token can attend to them,
while the sequence length (and the residual stream) stays ``N``. timm's ``Attention`` has no
argument for extra keys/values, so its forward is redone here from its own sub-modules (``qkv``,
``q_norm``/``k_norm``, ``norm``, ``proj``); with no prefix the wrapped block is simply called.
The prefix vectors live in the attention width (heads × head dim) and bypass the key/value
projections, as in the prefix-tuning ViTs of those papers.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ...errors import VisionZooError

BLOCK_PARTS = ("norm1", "attn", "ls1", "drop_path1", "norm2", "mlp", "ls2", "drop_path2")
ATTENTION_PARTS = ("qkv", "num_heads", "proj")


class PrefixBlock(nn.Module):
    """Wraps a pre-norm timm ``Block`` (``x + attn(norm1(x))``, then ``x + mlp(norm2(x))``).

    ``forward(x, prefix=(pk, pv))``: ``x`` ``[B, N, d]``; ``pk``, ``pv`` ``[B, L, d_attn]`` -> ``[B, N, d]``.
    """

    def __init__(self, block: nn.Module):
        super().__init__()
        missing = [n for n in BLOCK_PARTS if not hasattr(block, n)]
        missing += [f"attn.{n}" for n in ATTENTION_PARTS if not hasattr(getattr(block, "attn", None), n)]
        if missing:
            raise VisionZooError(f"prefix prompts need timm's pre-norm ViT Block with a fused qkv attention; "
                                 f"{type(block).__name__} lacks {missing}. Use a standard timm VisionTransformer "
                                 "(e.g. vit_base_patch16_224).")
        self.block = block

    def attend(self, x: Tensor, pk: Tensor, pv: Tensor) -> Tensor:
        """Self-attention of ``x`` ``[B, N, d]`` (already ``norm1``-ed) over ``[pk ‖ k]``, ``[pv ‖ v]``."""
        a = self.block.attn
        b, n, _ = x.shape
        h = a.num_heads
        gate = a.gate(x).sigmoid() if getattr(a, "gate", None) is not None else None
        q, k, v = a.qkv(x).reshape(b, n, 3, h, -1).permute(2, 0, 3, 1, 4).unbind(0)  # [B, h, N, hd] each
        q, k = a.q_norm(q), a.k_norm(k)
        hd = q.shape[-1]
        pk = pk.to(k.dtype).reshape(b, -1, h, hd).transpose(1, 2)  # [B, h, L, hd]
        pv = pv.to(v.dtype).reshape(b, -1, h, hd).transpose(1, 2)
        k, v = torch.cat([pk, k], dim=2), torch.cat([pv, v], dim=2)
        if getattr(a, "fused_attn", True):
            out = F.scaled_dot_product_attention(q, k, v)  # frozen block in eval mode: no attention dropout
        else:  # the explicit path (FLOP counting switches timm attention to it)
            out = ((q * a.scale) @ k.transpose(-2, -1)).softmax(dim=-1) @ v
        out = out.transpose(1, 2).reshape(b, n, -1)
        norm = getattr(a, "norm", None)
        if norm is not None:
            out = norm(out)
        if gate is not None:
            out = out * gate
        return a.proj_drop(a.proj(out)) if hasattr(a, "proj_drop") else a.proj(out)

    def forward(self, x: Tensor, prefix: tuple[Tensor, Tensor] | None = None) -> Tensor:
        if prefix is None:
            return self.block(x)
        blk = self.block
        x = x + blk.drop_path1(blk.ls1(self.attend(blk.norm1(x), *prefix)))
        return x + blk.drop_path2(blk.ls2(blk.mlp(blk.norm2(x))))
