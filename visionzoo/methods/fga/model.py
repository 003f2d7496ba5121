"""``coop_<open_clip name>`` / ``fga_<open_clip name>``: learned prompt context over a frozen CLIP.

The prompt of class ``c`` is ``[SOT] ctx_1 .. ctx_n <name_c><suffix> [EOT] [PAD]..`` where the
``ctx`` vectors live in the token-embedding space and are the only trained tensors (CoOp). They are
shared by all classes, or one set per class (``class_specific``). Context positions are found by
tokenising placeholder words (``"X X X X name."``), so the tokenizer, the EOT pooling position and
the padding are exactly those ``model.encode_text`` would use: with the context set to the token
embeddings of "a photo of a", :meth:`PromptCLIP.text_features` equals
``normalize(encode_text(tokenize("a photo of a {name}.")))``.

Both families build the same architecture; ``fga_*`` marks a prompt trained with SAPT (sharpness-
aware) for use with STSS at test time, ``coop_*`` a plainly trained one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import open_clip
import torch
from torch import Tensor, nn

from ...errors import VisionZooError
from ...registry import register_family
from .backbone import TINY_CLIP, load_clip
from .config import DEFAULT_CTX_INIT, PLACEHOLDER, RANDOM_CTX_TOKENS, PromptConfig
from .text import context_length, encode_embeddings, text_tower, token_embeddings


def check_class_names(names: Any) -> list[str]:
    """A non-empty list of non-empty strings, or a clear error."""
    if names is None:
        raise VisionZooError("no class names: a prompt model needs them (class_names=[...] when building it, or "
                             "model.class_names = [...]); dataset builders expose them as dataset.classes.")
    if isinstance(names, str) or not isinstance(names, Sequence):
        raise VisionZooError(f"class names must be a list of strings, got {type(names).__name__}.")
    names = list(names)
    if not names:
        raise VisionZooError("the class-name list is empty; give at least one class name.")
    bad = [i for i, n in enumerate(names) if not isinstance(n, str) or not n.strip()]
    if bad:
        raise VisionZooError(f"class names must be non-empty strings; entries {bad[:5]} are not "
                             f"({[names[i] for i in bad[:5]]}).")
    return names


class PromptCLIP(nn.Module):
    """A frozen open_clip model with a learned prompt context.

    Args:
        backbone: open_clip model name (``open_clip.list_models()``; ``clip_tiny_partworld`` too).
        class_names: class names (can be set later with ``model.class_names = [...]``).
        n_ctx: context vectors; default: the token count of ``ctx_init``, or 16 when random.
        ctx_init: init phrase (its token embeddings); ``""`` for random N(0, 0.02²) vectors.
        class_specific: one context per class (needs ``class_names``).
        suffix: text after the class name (default ".").
        backbone_pretrained: CLIP weights: False, True, an open_clip tag, a path, ``hf-hub:`` or URL.
        method: ``"coop"`` or ``"fga"`` (set by the family name).
        open_clip_kwargs: extra keyword arguments of ``open_clip.create_model`` (e.g. ``force_quick_gelu``).
    """

    def __init__(self, backbone: str, class_names: Sequence[str] | None = None, n_ctx: int | None = None,
                 ctx_init: str = DEFAULT_CTX_INIT, class_specific: bool = False, suffix: str = ".",
                 backbone_pretrained: bool | str = False, method: str = "coop",
                 open_clip_kwargs: dict[str, Any] | None = None):
        super().__init__()
        self.clip, source, self.pretrained_cfg = load_clip(backbone, backbone_pretrained, **(open_clip_kwargs or {}))
        self.clip.requires_grad_(False)
        self.clip.eval()
        self.tokenizer = open_clip.get_tokenizer(backbone)
        self.context_length = context_length(self.clip)
        init_ids = self._phrase_ids(ctx_init) if ctx_init else None
        n = n_ctx if n_ctx is not None else (len(init_ids) if init_ids is not None else RANDOM_CTX_TOKENS)
        if init_ids is not None and n != len(init_ids):
            raise VisionZooError(f"n_ctx={n} but ctx_init {ctx_init!r} is {len(init_ids)} tokens; give n_ctx="
                                 f"{len(init_ids)}, another phrase, or ctx_init='' for a random context.")
        if n < 1 or n + 3 > self.context_length:
            raise VisionZooError(f"n_ctx={n} does not fit the text context of {backbone} ({self.context_length} "
                                 "tokens: start + context + at least one class-name token + end); use n_ctx <= "
                                 f"{self.context_length - 3}.")
        if class_specific and class_names is None:
            raise VisionZooError("class_specific=True needs class_names at construction (one context per class).")
        self.config = PromptConfig(method=method, n_ctx=n, ctx_init=ctx_init, class_specific=class_specific,
                                   suffix=suffix)
        self.base_weights_source = source
        self.backbone_info = {"name": backbone, "source": source, "open_clip_kwargs": open_clip_kwargs or {}}
        num = len(check_class_names(class_names)) if class_specific else None
        self.ctx = nn.Parameter(self.initial_context(num_classes=num))
        self.register_buffer("prompt_ids", torch.empty(0, self.context_length, dtype=torch.long), persistent=False)
        self._class_names: list[str] | None = None
        self.class_set_version = 0  # bumped whenever the class names change (invalidates text caches)
        if class_names is not None:
            self.class_names = class_names

    # ------------------------------------------------------------------ tokens and context
    @property
    def n_ctx(self) -> int:
        return self.config.n_ctx

    @property
    def embed_dim(self) -> int:
        """Width ``D`` of the token embeddings (= of each context vector)."""
        return int(text_tower(self.clip).token_embedding.weight.shape[1])

    def _tokenize(self, texts: list[str]) -> Tensor:
        return self.tokenizer(texts).to(self.clip.logit_scale.device)

    def _phrase_ids(self, phrase: str) -> list[int]:
        """Token ids of ``phrase`` without start/end tokens."""
        ids = self.tokenizer([phrase])[0]
        end = int(ids.argmax())  # EOT has the largest id in CLIP's vocabulary
        out = ids[1:end].tolist()
        if not out:
            raise VisionZooError(f"ctx_init {phrase!r} has no tokens.")
        return out

    def phrase_context(self, phrase: str) -> Tensor:
        """The token embeddings of ``phrase`` as a context ``[n_ctx, D]`` (or ``[C, n_ctx, D]``)."""
        ids = self._phrase_ids(phrase)
        if len(ids) != self.n_ctx:
            raise VisionZooError(f"{phrase!r} is {len(ids)} tokens, this prompt has n_ctx={self.n_ctx}.")
        with torch.no_grad():
            emb = token_embeddings(self.clip, torch.tensor([ids], device=self.clip.logit_scale.device))[0]
        if self.config.class_specific:
            emb = emb.unsqueeze(0).expand(self.ctx.shape[0], -1, -1)
        return emb.detach().clone().float()

    def initial_context(self, num_classes: int | None = None) -> Tensor:
        """The context this model starts from (init phrase embeddings, or seeded-by-caller random)."""
        cfg = self.config
        if cfg.ctx_init:
            ids = self._phrase_ids(cfg.ctx_init)
            with torch.no_grad():
                emb = token_embeddings(self.clip, torch.tensor([ids], device=self.clip.logit_scale.device))[0]
            emb = emb.detach().clone().float()
        else:
            emb = torch.randn(cfg.n_ctx, self.embed_dim) * 0.02
        if cfg.class_specific:
            num = num_classes if num_classes is not None else self.ctx.shape[0]
            emb = emb.unsqueeze(0).repeat(num, 1, 1)
        return emb

    @property
    def class_names(self) -> list[str] | None:
        return self._class_names

    @class_names.setter
    def class_names(self, names: Sequence[str]) -> None:
        names = check_class_names(names)
        if self.config.class_specific and len(names) != self.ctx.shape[0]:
            raise VisionZooError(f"this prompt has one context per class for {self.ctx.shape[0]} classes; it cannot "
                                 f"serve {len(names)} classes (use a shared context for new class sets).")
        if names == self._class_names:
            return
        self.prompt_ids = self._prompt_ids(names)
        self._class_names = names
        self.class_set_version += 1

    def _prompt_ids(self, names: list[str]) -> Tensor:
        """Token ids ``[C, L]`` of ``"X .. X <name><suffix>"``; context overflow is an error."""
        n, L = self.n_ctx, self.context_length
        encode = getattr(self.tokenizer, "encode", None)
        if callable(encode):
            lengths = [len(encode(name + self.config.suffix)) for name in names]
            too_long = [(nm, k) for nm, k in zip(names, lengths, strict=True) if n + k + 2 > L]
            if too_long:
                nm, k = max(too_long, key=lambda t: t[1])
                raise VisionZooError(f"{len(too_long)} class prompts overflow the text context of {L} tokens: "
                                     f"start + {n} context + {k} tokens for {nm!r} + end = {n + k + 2}. Use a "
                                     f"smaller n_ctx (at most {L - 2 - max(lengths)}) or shorter class names.")
        texts = [" ".join([PLACEHOLDER] * n) + " " + name + self.config.suffix for name in names]
        ids = self._tokenize(texts)
        mark = int(self.tokenizer([PLACEHOLDER])[0][1])
        if not bool((ids[:, 1:1 + n] == mark).all()):
            raise VisionZooError("the tokenizer did not keep the context placeholders at positions 1..n_ctx; this "
                                 "tokenizer is not supported by the prompt learner.")
        return ids

    # ------------------------------------------------------------------ features
    def _ids(self) -> Tensor:
        if self._class_names is None:
            check_class_names(None)
        return self.prompt_ids

    def prompt_embeddings(self, ctx: Tensor | None = None, rows: slice | None = None) -> Tensor:
        """Token embeddings ``[C, L, D]`` of the class prompts with context ``ctx`` (default: ``self.ctx``);
        ``rows`` picks a slice of the classes."""
        ids = self._ids()[rows or slice(None)]
        ctx = self.ctx if ctx is None else ctx
        if ctx.shape[-2:] != self.ctx.shape[-2:] or ctx.dim() != self.ctx.dim():
            raise VisionZooError(f"context of shape {tuple(ctx.shape)} does not fit this prompt "
                                 f"({tuple(self.ctx.shape)}).")
        with torch.no_grad():
            emb = token_embeddings(self.clip, ids)
        ctx = ctx.to(emb.dtype)
        ctx = ctx.unsqueeze(0).expand(ids.shape[0], -1, -1) if ctx.dim() == 2 else ctx[rows or slice(None)]
        n = self.n_ctx
        return torch.cat([emb[:, :1], ctx, emb[:, 1 + n:]], dim=1)

    def text_features(self, ctx: Tensor | None = None, normalize: bool = True, chunk: int | None = None,
                      rows: slice | None = None) -> Tensor:
        """Class text features ``[C, E]`` for context ``ctx`` ``[n_ctx, D]`` / ``[C, n_ctx, D]``;
        ``chunk`` encodes that many classes at a time, ``rows`` only a slice of the classes."""
        x = self.prompt_embeddings(ctx, rows)
        ids = self._ids()[rows or slice(None)]
        if not chunk or chunk >= x.shape[0]:
            return encode_embeddings(self.clip, x, ids, normalize)
        return torch.cat([encode_embeddings(self.clip, x[i:i + chunk], ids[i:i + chunk], normalize)
                          for i in range(0, x.shape[0], chunk)])

    def encode_image(self, images: Tensor) -> Tensor:
        """Normalised image features ``[B, E]`` of normalised images ``[B, 3, H, W]``."""
        return self.clip.encode_image(images, normalize=True)

    def logit_scale(self) -> Tensor:
        """CLIP's temperature ``τ = exp(logit_scale)`` (a scalar tensor)."""
        return self.clip.logit_scale.exp()

    def logits(self, image_features: Tensor, text_features: Tensor) -> Tensor:
        """``τ · f tᵀ`` (+ CLIP's logit bias if it has one): ``[..., E] x [C, E] -> [..., C]``."""
        out = self.logit_scale() * image_features @ text_features.t()
        bias = getattr(self.clip, "logit_bias", None)
        return out + bias if bias is not None else out

    def forward(self, images: Tensor | None = None, image_features: Tensor | None = None) -> Tensor:
        """Logits ``[B, C]`` of normalised images ``[B, 3, H, W]``, or of their features ``[B, E]`` when
        already computed (the image tower is frozen); gradients reach ``ctx`` only."""
        if image_features is None:
            if images is None:
                raise VisionZooError("PromptCLIP.forward needs images or image_features.")
            image_features = self.encode_image(images)
        return self.logits(image_features, self.text_features())

    def train(self, mode: bool = True) -> PromptCLIP:
        super().train(mode)
        self.clip.eval()  # frozen: no dropout/BN updates even while the context trains
        return self


def _family(method: str):
    def build(backbone: str, **kwargs: Any) -> PromptCLIP:
        kwargs.pop("method", None)
        return PromptCLIP(backbone, method=method, **kwargs)
    return build


_BACKBONES = [TINY_CLIP, "ViT-B-16", "ViT-B-16-quickgelu"]
# Any name is accepted here; PromptCLIP raises a "did you mean" error listing open_clip's models
# (the registry's own hint for family names speaks of timm models).
register_family("coop", default_backbones=_BACKBONES, backbone_check=lambda name: True)(_family("coop"))
register_family("fga", default_backbones=_BACKBONES, backbone_check=lambda name: True)(_family("fga"))
