"""The frozen timm ViT every continual learner of this package sits on, and its shared bookkeeping.

:class:`FrozenViTLearner` holds the backbone (frozen, kept in eval mode), the class order of the
run and the number of classes seen so far (both buffers, so a checkpoint records them), and the
preprocessing/backbone info the checkpoint layer needs. Subclasses add what they train.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from ...backbones import create_timm_backbone, preprocessing_from_timm
from ...errors import CheckpointError, VisionZooError
from .lda import StreamingLDA


def is_timm_vit(name: str) -> bool:
    """``backbone_check`` of the families: a timm model name."""
    import timm
    return timm.is_model(name)


def default_adapted_blocks(depth: int) -> list[int]:
    """The paper's "first 7 of 12 blocks", scaled to ``depth`` (8 blocks -> 0..4, 12 -> 0..6)."""
    return list(range(max(1, round(7 * depth / 12))))


def check_block_indices(indices: list[int], depth: int, backbone: str) -> list[int]:
    """Validated, sorted block indices; negative indices count from the end like Python's."""
    out = []
    for i in indices:
        j = int(i) + depth if int(i) < 0 else int(i)
        if not 0 <= j < depth:
            raise VisionZooError(f"adapted block index {i} is out of range: {backbone} has {depth} blocks, so "
                                 f"indices must lie in 0..{depth - 1} (or -{depth}..-1).")
        if j in out:
            raise VisionZooError(f"adapted block {j} is listed twice in {list(indices)}.")
        out.append(j)
    if not out:
        raise VisionZooError("no block to adapt: give at least one index (e.g. --adapt-blocks 0 1 2).")
    return sorted(out)


def load_backbone_state(vit: nn.Module, state: dict[str, Tensor], wrapped_blocks: list[int] = ()) -> None:
    """Copy a plain timm ViT state dict into ``vit`` whose blocks ``wrapped_blocks`` are wrapped
    (their keys gain ``.block``); the classifier head of ``state`` is ignored. All or nothing."""
    from ...checkpoint import load_state_into

    wrapped = set(wrapped_blocks)
    mapped = {}
    for k, v in state.items():
        parts = k.split(".")
        if parts[0] == "blocks" and len(parts) > 2 and parts[1].isdigit() and int(parts[1]) in wrapped:
            k = ".".join(["blocks", parts[1], "block", *parts[2:]])
        mapped[k] = v
    own = {k: v for k, v in vit.state_dict().items() if ".retrieval." not in k}
    missing = [k for k in own if k not in mapped]
    if missing:
        raise CheckpointError(f"the weights are not those of this ViT backbone: {len(missing)} tensors are "
                              f"missing (e.g. {missing[:3]}). Nothing was loaded.")
    full = {**vit.state_dict(), **{k: mapped[k] for k in own}}
    load_state_into(vit, full, "full", where="backbone weights")


CLASSIFIERS = ("head", "lda")


class FrozenViTLearner(nn.Module):
    """Base of the continual learners: a frozen timm ViT plus class-order/seen-class buffers.

    Args:
        backbone: timm model name (a ``VisionTransformer``-like model with ``blocks``).
        num_classes: classes of the whole run (the head/prototypes cover all; unseen ones are masked).
        backbone_pretrained: backbone weights (``False``, ``True`` = timm's default, path, hf-hub, URL).
        class_names: names in the run's class order.
        classifier: ``"head"`` (the model's own classifier) or ``"lda"``: in eval, a streaming shared-
            covariance LDA over the features (:class:`~.lda.StreamingLDA`, filled by the learner after each task).
        lda_shrinkage: shrinkage of the LDA covariance towards a scaled identity.
        timm_kwargs: passed to ``timm.create_model`` (e.g. ``img_size=32, depth=2`` in tests).
    """

    def __init__(self, backbone: str, num_classes: int = 100, backbone_pretrained: bool | str = False,
                 class_names: list[str] | None = None, *, classifier: str = "head", lda_shrinkage: float = 1e-3,
                 **timm_kwargs: Any):
        super().__init__()
        if classifier not in CLASSIFIERS:
            raise VisionZooError(f"classifier must be one of {CLASSIFIERS}, got {classifier!r}")
        vit, source = create_timm_backbone(backbone, backbone_pretrained, num_classes=0, **timm_kwargs)
        if not hasattr(vit, "blocks") or not hasattr(vit, "patch_embed") or not hasattr(vit, "_pos_embed"):
            raise VisionZooError(f"{backbone} is a {type(vit).__name__}, not a timm VisionTransformer; the "
                                 "continual learners of hippotune need a ViT (blocks of tokens).")
        for p in vit.parameters():
            p.requires_grad_(False)
        self.vit = vit.eval()
        self.num_classes = num_classes
        self.embed_dim = int(vit.num_features)
        self.register_buffer("class_order", torch.arange(num_classes))
        self.register_buffer("num_seen", torch.tensor(0))
        self.base_weights_source = source
        self.backbone_info = {"name": backbone, "source": source, "timm_kwargs": timm_kwargs}
        self.pretrained_cfg = preprocessing_from_timm(vit)
        self.class_names = class_names
        self.classifier = classifier
        self.lda = StreamingLDA(self.embed_dim, num_classes, lda_shrinkage) if classifier == "lda" else None

    @property
    def depth(self) -> int:
        return len(self.vit.blocks)

    def train(self, mode: bool = True) -> FrozenViTLearner:
        super().train(mode)
        self.vit.eval()  # frozen: no dropout / drop-path, whatever the learner does
        for m in self.trainable_modules():
            m.train(mode)
        return self

    def trainable_modules(self) -> list[nn.Module]:
        """Modules inside ``vit`` that train (set back to train mode by :meth:`train`)."""
        return []

    def features(self, x: Tensor) -> Tensor:
        """``x`` ``[B, 3, H, W]`` -> pre-logits ``[B, d]`` of the (possibly adapted) backbone."""
        return self.vit.forward_head(self.vit.forward_features(x), pre_logits=True)

    def embed(self, x: Tensor) -> Tensor:
        """What the classifier head reads: ``[B, 3, H, W]`` -> ``[B, d]`` (default: :meth:`features`)."""
        return self.features(x)

    def eval_logits(self, features: Tensor, logits: Tensor) -> Tensor:
        """Prediction in eval mode: the LDA's logits once it has statistics (``classifier="lda"``), else
        ``logits`` (the model's own classifier). ``features`` ``[B, d]`` is what :meth:`embed` returns."""
        if self.lda is not None and self.lda.fitted:
            return self.lda(features)
        return logits

    def classify(self, features: Tensor) -> Tensor:
        """``features`` ``[B, d]`` (from :meth:`embed`) -> logits ``[B, C]`` of the model's ``head``; in eval
        mode the LDA's instead once fitted, and classes not seen yet at −inf."""
        logits = self.head(features)
        if not self.training:
            logits = self.mask_unseen(self.eval_logits(features, logits))
        return logits

    def mask_unseen(self, logits: Tensor) -> Tensor:
        """``[B, C]`` -> unseen classes (labels >= num_seen) set to −inf (no task id is used)."""
        seen = int(self.num_seen)
        if 0 < seen < logits.shape[1]:
            logits = logits.clone()
            logits[:, seen:] = float("-inf")
        return logits

    def set_class_order(self, order: list[int] | Tensor, names: list[str] | None = None) -> None:
        """Record the run's class order (original ids by new label) and the names in that order."""
        order_t = torch.as_tensor(order, dtype=torch.long)
        if order_t.shape != self.class_order.shape:
            raise VisionZooError(f"class order has {order_t.numel()} classes, the model {self.num_classes}.")
        self.class_order.copy_(order_t.to(self.class_order.device))
        if names is not None:
            self.class_names = list(names)

    def check_class_order(self, order: list[int] | Tensor, where: str = "the checkpoint") -> None:
        """Raise :class:`CheckpointError` unless ``order`` is the recorded class order."""
        order_t = torch.as_tensor(order, dtype=torch.long).cpu()
        mine = self.class_order.cpu()
        if order_t.shape != mine.shape or not torch.equal(order_t, mine):
            first = (mine != order_t).nonzero()[0].item() if order_t.shape == mine.shape else 0
            raise CheckpointError(
                f"{where} was trained with another class order: its label {first} is original class "
                f"{int(mine[first])}, but this run's class order puts class {int(order_t[first])} there "
                f"(checkpoint order starts {mine[:6].tolist()}, this run {order_t[:6].tolist()}). Its head "
                "rows would score the wrong classes. Use the --class-order-seed / --class-order the "
                "checkpoint was trained with (see its config.json class_names).")
