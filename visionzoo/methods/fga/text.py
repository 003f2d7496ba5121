"""Run an open_clip text tower from token *embeddings* (so prompt context vectors can be learned).

open_clip's ``encode_text`` starts from token ids. A prompt learner replaces some token embeddings
by free vectors, so it needs the same computation from embeddings on: positional embedding,
batch-first transformer (open_clip >= 2.26; no LND permute), final LayerNorm, pooling (at the EOT
token for ``argmax``/``eos`` pooling) and the projection (a matrix Parameter or a Linear).

Two model layouts exist: ``CLIP`` keeps the text pieces on the model (``text_pool_type``,
``text_eos_id``), ``CustomTextCLIP`` keeps them in ``model.text`` (an open_clip ``TextTransformer``
with ``pool_type``, ``eos_id``, an optional appended class token and padding mask). Hugging Face
text towers have no token-embedding/transformer split here and are refused.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from open_clip.transformer import TextTransformer, text_global_pool
from torch import Tensor, nn

from ...errors import VisionZooError


def text_tower(clip: nn.Module) -> nn.Module:
    """The module holding ``token_embedding``, ``positional_embedding``, ``transformer``, ``ln_final``."""
    text = getattr(clip, "text", None)
    if text is None:
        if not hasattr(clip, "token_embedding"):
            raise VisionZooError(f"{type(clip).__name__} has no open_clip text tower (token_embedding/transformer).")
        return clip
    if isinstance(text, TextTransformer):
        return text
    raise VisionZooError(f"{type(clip).__name__} uses a {type(text).__name__} text tower; the prompt learner needs "
                         "open_clip's own TextTransformer (token embeddings it can replace). Hugging Face text "
                         "towers are not supported; pick an open_clip model whose text_cfg has no hf_model_name.")


def _pool_settings(tower: nn.Module) -> tuple[str, int | None, Tensor | None]:
    if isinstance(tower, TextTransformer):
        return tower.pool_type, getattr(tower, "eos_id", None), tower.cls_emb
    return tower.text_pool_type, getattr(tower, "text_eos_id", None), None


def context_length(clip: nn.Module) -> int:
    """Number of token positions of the text tower."""
    return int(text_tower(clip).positional_embedding.shape[0])


def token_embeddings(clip: nn.Module, ids: Tensor) -> Tensor:
    """Token ids ``[B, L]`` -> embeddings ``[B, L, D]`` (no positional embedding)."""
    return text_tower(clip).token_embedding(ids)


def encode_embeddings(clip: nn.Module, x: Tensor, ids: Tensor, normalize: bool = True) -> Tensor:
    """Text features ``[B, E]`` from token embeddings ``x`` ``[B, L, D]`` and the token ids ``ids``
    ``[B, L]`` they stand for (ids choose the pooled position and the padding mask only).

    With ``x = token_embeddings(clip, ids)`` this equals ``clip.encode_text(ids)``.
    """
    tower = text_tower(clip)
    pool_type, eos_id, cls_emb = _pool_settings(tower)
    cast = tower.transformer.get_cast_dtype()
    x = x.to(cast)
    seq_len = ids.shape[1]
    attn_mask = tower.attn_mask
    if cls_emb is not None:  # CoCa-style class token appended at the end
        x = torch.cat([x, cls_emb.to(x.dtype).view(1, 1, -1).expand(x.shape[0], 1, -1)], 1)
        seq_len += 1
    if isinstance(tower, TextTransformer) and (tower.use_pad_mask or cls_emb is not None):
        pad_mask = tower._build_additive_mask(ids, seq_len, x.dtype)
        attn_mask = pad_mask if attn_mask is None else attn_mask[:seq_len, :seq_len].unsqueeze(0) + pad_mask
    x = x + tower.positional_embedding[:seq_len].to(cast)
    x = tower.transformer(x, attn_mask=attn_mask)
    if cls_emb is not None:
        pooled = tower.ln_final(x[:, -1])
    else:
        pooled = text_global_pool(tower.ln_final(x), ids, pool_type, eos_token_id=eos_id)
    proj = tower.text_projection
    if proj is not None:
        pooled = proj(pooled) if isinstance(proj, nn.Linear) else pooled @ proj
    return F.normalize(pooled, dim=-1) if normalize else pooled
