"""Training FLOPs per image, counted by ``torch.utils.flop_counter`` on a real training step.

The forward count includes every pass a training step makes (L2P: the frozen query pass plus the
prompted pass; HippoTune: one pass, its loop included); the backward count is what autograd runs
(input gradients through the frozen blocks, parameter gradients of the trained tensors only).
The paper's GFLOPs column (16.9 vs 35.2 for ViT-B/16) counts forward passes; both are reported.
Attention is counted through timm's explicit (unfused) path, because the counter has no formula
for the CPU kernel of ``scaled_dot_product_attention``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
from torch import Tensor, nn
from torch.utils.flop_counter import FlopCounterMode


@contextmanager
def unfused_attention(model: nn.Module) -> Iterator[None]:
    """Switch timm attention modules to their matmul path (same result, countable FLOPs)."""
    saved = [(m, m.fused_attn) for m in model.modules() if hasattr(m, "fused_attn")]
    try:
        for m, _ in saved:
            m.fused_attn = False
        yield
    finally:
        for m, flag in saved:
            m.fused_attn = flag


def training_flops(model: nn.Module, step_loss: Callable[[nn.Module, Tensor, Tensor], Tensor], images: Tensor,
                   labels: Tensor) -> dict[str, float]:
    """GFLOPs per image of one training step of ``step_loss(model, images, labels)`` (forward, backward).

    Runs on a deep copy in train mode, so the model (and its RNG-free state) is left as it was.
    """
    work = copy.deepcopy(model).train()
    n = images.shape[0]
    with unfused_attention(work):
        with FlopCounterMode(display=False) as fwd:
            loss = step_loss(work, images, labels)
        with FlopCounterMode(display=False) as bwd:
            loss.backward()
    f, b = fwd.get_total_flops() / n / 1e9, bwd.get_total_flops() / n / 1e9
    return {"forward_gflops": f, "backward_gflops": b, "train_gflops": f + b}


def inference_flops(model: nn.Module, images: Tensor) -> float:
    """GFLOPs per image of one evaluation forward pass."""
    work = copy.deepcopy(model).eval()
    with unfused_attention(work), torch.no_grad(), FlopCounterMode(display=False) as c:
        work(images)
    return c.get_total_flops() / images.shape[0] / 1e9
