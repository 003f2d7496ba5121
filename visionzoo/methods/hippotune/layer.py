"""``RetrievalBlock``: wraps one frozen timm ViT block with an :class:`IterativeRetrieval` memory.

``h^l = Block_l([h^{l−1} ‖ v¹ … v^T])[:, :N]``: the retrieved tokens join the block input like
prompts and are dropped after the block. Tokens of steps a sample did not run (early stop) are
hidden from attention by an additive mask, so every sample sees only its own ``v¹..v^{T_i}``.
The wrapped block is called, never modified.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor, nn

from .retrieval import IterativeRetrieval, Retrieved

QueryKind = Literal["cls", "mean"]


class RetrievalBlock(nn.Module):
    """A frozen block plus its retrieval memory.

    Args:
        block: a timm ViT block (``forward(x, attn_mask=None)``), kept frozen.
        retrieval: the layer's memory and loop.
        num_prefix_tokens: class/register tokens at the front of the sequence.
        query: ``"cls"`` (the first token) or ``"mean"`` (mean of the patch tokens) of ``norm1(h)``.
    """

    def __init__(self, block: nn.Module, retrieval: IterativeRetrieval, num_prefix_tokens: int = 1,
                 query: QueryKind = "cls"):
        super().__init__()
        if query not in ("cls", "mean"):
            raise ValueError(f"query must be 'cls' or 'mean', got {query!r}")
        if query == "cls" and num_prefix_tokens < 1:
            raise ValueError("query='cls' needs a backbone with a class token; use query='mean'.")
        self.block, self.retrieval = block, retrieval
        self.num_prefix_tokens, self.query = num_prefix_tokens, query
        self.last: Retrieved | None = None  # the latest loop output (for the auxiliary losses)

    def make_query(self, x: Tensor) -> Tensor:
        """``x`` ``[B, N, d]`` block input -> ``q¹`` ``[B, d]`` (in the block's own norm1 space)."""
        norm = getattr(self.block, "norm1", None)
        if self.query == "cls":
            h = x[:, 0]
        else:
            h = x[:, self.num_prefix_tokens:].mean(dim=1)
        return norm(h) if norm is not None else nn.functional.layer_norm(h, h.shape[-1:])

    def forward(self, x: Tensor, attn_mask: Tensor | None = None, is_causal: bool = False) -> Tensor:
        """``x`` ``[B, N, d]`` -> ``[B, N, d]``."""
        if attn_mask is not None or is_causal:
            raise ValueError("HippoTune retrieval blocks take no outer attention mask (the retrieved tokens "
                             "bring their own); call the backbone without attn_mask/is_causal.")
        out = self.retrieval(self.make_query(x))
        self.last = out
        n = x.shape[1]
        tokens = out.tokens.to(x.dtype)
        extended = torch.cat([x, tokens], dim=1)  # [B, N + T, d]
        mask = None
        if not bool(out.valid.all()):
            keep = torch.cat([torch.ones_like(out.valid[:, :1]).expand(-1, n), out.valid], dim=1)  # [B, N + T]
            mask = torch.zeros(keep.shape, dtype=x.dtype, device=x.device).masked_fill(~keep, float("-inf"))
            mask = mask[:, None, None, :]  # [B, 1, 1, N + T], broadcast over heads and queries
        y = self.block(extended, attn_mask=mask) if mask is not None else self.block(extended)
        return y[:, :n]
