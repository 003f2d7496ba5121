"""Test-time predictors that share one evaluation harness: the same views, the same image features.

Every predictor works on image features ``[B, N, E]`` of ``N`` views per image (view 0 = the
original) computed once by :func:`encode_views`; what differs is the text side:

* :class:`SinglePrompt`: one prompt, original view (zero-shot CLIP, CoOp, SAPT);
* :class:`ConditionalPromptHead`: CoCoOp's per-image prompt (context + Meta-Net shift), original
  view; its text encoding is per image (``B × C`` prompts per batch), so it is in the head cost;
* :class:`TemplateEnsemble`: zero-shot CLIP with the mean text feature of many templates;
* :class:`Zero`: keep the most confident views, vote their argmaxes (no update);
* :class:`STSS`: keep the views with the flattest entropy landscape around the prompt, vote (FGA
  when the prompt was trained with SAPT). The ``R`` perturbed prompt sets are encoded once per class
  set in :meth:`Predictor.prepare` and cached; per image only matrix products remain;
* :class:`TPT`: one AdamW step on the prompt per image (marginal entropy of the most confident
  views), prediction on the original view, prompt and optimizer reset for the next image.

``prepare(model)`` is the per-class-set cost (text encoding), ``head(model, features)`` the
per-image cost on top of image encoding. Nothing but TPT enables gradients, and no predictor
changes the model's parameters.
"""

from __future__ import annotations

from dataclasses import dataclass

import open_clip
import torch
from torch import Tensor, nn

from .cocoop import TEXT_CHUNK, ConditionalPrompt, conditional_logits, conditional_text_features
from .config import STSS_KEEP, STSS_LAMBDA, STSS_R, STSS_RHO, TPT_KEEP, TPT_LR, TPT_STEPS, ZERO_KEEP
from .model import PromptCLIP
from .selection import entropy, keep_count, lowest, marginal_entropy, perturb_context, stss_scores, vote


@dataclass
class Prediction:
    """``pred`` ``[B]`` class indices; ``kept`` ``[B, k]`` view indices used (None: the original only);
    ``scores`` ``[B, N]`` per-view selection scores (lower is kept), when the method has them."""

    pred: Tensor
    kept: Tensor | None = None
    scores: Tensor | None = None


@torch.no_grad()
def encode_views(model: PromptCLIP, views: Tensor, n_views: int, chunk: int = 256) -> Tensor:
    """Image features ``[B, N, E]`` of ``views`` ``[B * N, 3, S, S]`` (image-major, as TTAViews gives)."""
    feats = torch.cat([model.encode_image(views[i:i + chunk]) for i in range(0, views.shape[0], chunk)])
    return feats.view(-1, n_views, feats.shape[-1])


class Predictor:
    """Base class. ``multi_view``: whether the head looks at views other than the original."""

    name: str = ""
    multi_view: bool = True

    def __init__(self, name: str | None = None):
        self.name = name or self.name
        self._version: tuple[int, int] | None = None

    def prepare(self, model: PromptCLIP) -> None:
        """Encode what depends on the class set (once per class set; cached)."""
        key = (id(model), model.class_set_version)
        if key != self._version:
            self._prepare(model)
            self._version = key

    def _prepare(self, model: PromptCLIP) -> None:
        pass

    def head(self, model: PromptCLIP, features: Tensor) -> Prediction:
        """Predictions from image features ``[B, N, E]``."""
        raise NotImplementedError


class SinglePrompt(Predictor):
    """A fixed prompt context ``ctx`` (``[n_ctx, D]``), the original view only."""

    multi_view = False

    def __init__(self, name: str, ctx: Tensor):
        super().__init__(name)
        self.ctx = ctx.detach()

    @torch.no_grad()
    def _prepare(self, model: PromptCLIP) -> None:
        self.text = model.text_features(self.ctx.to(model.ctx.device))

    @torch.no_grad()
    def head(self, model: PromptCLIP, features: Tensor) -> Prediction:
        return Prediction(model.logits(features[:, 0], self.text).argmax(-1))


class ConditionalPromptHead(Predictor):
    """CoCoOp: the context shifted by the Meta-Net of each image's original-view feature; ``chunk``
    prompts (images x classes) per text-encoder call."""

    multi_view = False

    def __init__(self, name: str, prompt: ConditionalPrompt, chunk: int | None = TEXT_CHUNK):
        super().__init__(name)
        self.prompt, self.chunk = prompt, chunk

    def _prepare(self, model: PromptCLIP) -> None:
        device = model.ctx.device
        self.prompt = ConditionalPrompt(self.prompt.ctx.detach().to(device), self.prompt.meta_net.to(device))

    @torch.no_grad()
    def head(self, model: PromptCLIP, features: Tensor) -> Prediction:
        f0 = features[:, 0]
        text = conditional_text_features(model, self.prompt, f0, chunk=self.chunk)   # [B, C, E]
        return Prediction(conditional_logits(model, f0, text).argmax(-1))


class TemplateEnsemble(Predictor):
    """Zero-shot CLIP with the mean normalised text feature of ``templates`` (default: the 80 OpenAI
    ImageNet templates open_clip ships) per class, on the original view."""

    name = "zeroshot-ensemble"
    multi_view = False

    def __init__(self, name: str | None = None, templates=None):
        super().__init__(name)
        self.templates = tuple(templates or open_clip.OPENAI_IMAGENET_TEMPLATES)

    @torch.no_grad()
    def _prepare(self, model: PromptCLIP) -> None:
        device = model.ctx.device
        clf = open_clip.build_zero_shot_classifier(model.clip, model.tokenizer, model.class_names, self.templates,
                                                   num_classes_per_batch=10, device=device, use_tqdm=False)
        self.text = clf.t().contiguous()  # [C, E]

    @torch.no_grad()
    def head(self, model: PromptCLIP, features: Tensor) -> Prediction:
        return Prediction(model.logits(features[:, 0], self.text).argmax(-1))


class Zero(Predictor):
    """Zero (Farina et al., 2024): keep the ``keep`` fraction of views with the lowest entropy, take
    the majority vote of their argmax predictions. No update."""

    def __init__(self, name: str, ctx: Tensor, keep: float = ZERO_KEEP):
        super().__init__(name)
        self.ctx, self.keep = ctx.detach(), keep

    @torch.no_grad()
    def _prepare(self, model: PromptCLIP) -> None:
        self.text = model.text_features(self.ctx.to(model.ctx.device))

    @torch.no_grad()
    def head(self, model: PromptCLIP, features: Tensor) -> Prediction:
        logits = model.logits(features, self.text)
        scores = entropy(logits)
        kept = lowest(scores, keep_count(features.shape[1], self.keep))
        return Prediction(vote(logits, kept), kept, scores)


class STSS(Predictor):
    """Sharpness-based test sample selection.

    Args:
        ctx: the prompt ``p`` (the SAPT-trained context for FGA).
        r: number of random prompt perturbations ``R``.
        keep: views kept ``s``.
        rho: perturbation radius ``ρ'`` (on the whole context vector).
        lam: weight ``λ`` of the sharpness term.
        seed: seed of the perturbation directions.
    """

    def __init__(self, name: str, ctx: Tensor, r: int = STSS_R, keep: int = STSS_KEEP, rho: float = STSS_RHO,
                 lam: float = STSS_LAMBDA, seed: int = 0):
        super().__init__(name)
        if r < 0 or keep < 1:
            raise ValueError(f"STSS needs r >= 0 and keep >= 1, got r={r}, keep={keep}")
        self.ctx, self.r, self.keep, self.rho, self.lam, self.seed = ctx.detach(), r, keep, rho, lam, seed

    @torch.no_grad()
    def _prepare(self, model: PromptCLIP) -> None:
        ctx = self.ctx.to(model.ctx.device)
        self.text = model.text_features(ctx)
        deltas = perturb_context(ctx, self.r, self.rho, self.seed)
        self.perturbed = (torch.stack([model.text_features(c) for c in deltas]) if self.r
                          else self.text.new_zeros(0, *self.text.shape))

    @torch.no_grad()
    def head(self, model: PromptCLIP, features: Tensor) -> Prediction:
        scores, logits = stss_scores(features, model.logit_scale(), self.text, self.perturbed, self.lam,
                                     getattr(model.clip, "logit_bias", None))
        kept = lowest(scores, self.keep)
        return Prediction(vote(logits, kept), kept, scores)


class TPT(Predictor):
    """Test-time prompt tuning (Shu et al., 2022), one image at a time.

    For each image: the context is reset to ``ctx``; ``steps`` AdamW steps (lr ``lr``, a fresh
    optimizer) minimise the marginal entropy of the ``keep`` fraction of lowest-entropy views; the
    prediction is the argmax on the original view with the updated context. ``class_chunk`` bounds
    memory by back-propagating the text encoder a chunk of classes at a time (the same gradient:
    a no-grad pass gives dLoss/dtext, then each chunk is re-encoded with grad).
    """

    def __init__(self, name: str, ctx: Tensor, lr: float = TPT_LR, steps: int = TPT_STEPS, keep: float = TPT_KEEP,
                 class_chunk: int | None = None):
        super().__init__(name)
        self.ctx, self.lr, self.steps, self.keep, self.class_chunk = ctx.detach(), lr, steps, keep, class_chunk

    def _loss_grad(self, model: PromptCLIP, ctx: nn.Parameter, feats: Tensor) -> Tensor:
        """Leave d(marginal entropy)/d(ctx) in ``ctx.grad``; ``feats`` ``[N, E]``."""
        def loss_of(text: Tensor) -> Tensor:
            logits = model.logits(feats, text)
            kept = lowest(entropy(logits.detach())[None], keep_count(feats.shape[0], self.keep))[0]
            return marginal_entropy(logits[kept])

        C = model.prompt_ids.shape[0]
        if not self.class_chunk or self.class_chunk >= C:
            loss = loss_of(model.text_features(ctx))
            loss.backward()
            return loss.detach()
        with torch.no_grad():
            text = model.text_features(ctx, chunk=self.class_chunk)
        text.requires_grad_(True)
        loss = loss_of(text)
        (g_text,) = torch.autograd.grad(loss, text)
        for i in range(0, C, self.class_chunk):
            part = model.text_features(ctx, rows=slice(i, i + self.class_chunk))
            part.backward(g_text[i:i + self.class_chunk])
        return loss.detach()

    def head(self, model: PromptCLIP, features: Tensor) -> Prediction:
        preds = []
        base = self.ctx.to(model.ctx.device)
        for feats in features:  # one image at a time: the prompt is reset for every image
            ctx = nn.Parameter(base.clone())
            opt = torch.optim.AdamW([ctx], lr=self.lr)
            with torch.enable_grad():
                for _ in range(self.steps):
                    opt.zero_grad(set_to_none=True)
                    self._loss_grad(model, ctx, feats.detach())
                    opt.step()
            with torch.no_grad():
                text = model.text_features(ctx.detach(), chunk=self.class_chunk)
                preds.append(model.logits(feats[0], text).argmax(-1))
        return Prediction(torch.stack(preds))
