"""STSS, TPT, Zero and the selection arithmetic."""

from __future__ import annotations

import math

import pytest
import torch

import visionzoo
from visionzoo.data import TTAViews
from visionzoo.methods.fga.predictors import STSS, TPT, Zero, encode_views
from visionzoo.methods.fga.selection import entropy, marginal_entropy, perturb_context, stss_scores, vote

from .test_fga_helpers import CLASSES, tiny_clip


@pytest.fixture(scope="module")
def setup():
    name = tiny_clip()
    torch.manual_seed(0)
    model = visionzoo.create_model(f"fga_{name}", class_names=CLASSES).eval()
    views = TTAViews(16, 32, mean=(0.5,) * 3, std=(0.25,) * 3, seed=0)
    images = torch.rand(3, 3, 40, 36)
    feats = encode_views(model, torch.cat([views(im) for im in images]), 16)
    return model, feats


def test_stss_scores_follow_the_definition():
    torch.manual_seed(1)
    f = torch.nn.functional.normalize(torch.randn(2, 5, 8), dim=-1)
    t = torch.nn.functional.normalize(torch.randn(3, 8), dim=-1)
    tr = torch.nn.functional.normalize(torch.randn(4, 3, 8), dim=-1)
    scores, logits = stss_scores(f, 10.0, t, tr, lam=0.5)
    h0 = entropy(10.0 * f @ t.t())
    hr = torch.stack([entropy(10.0 * f @ x.t()) for x in tr])
    torch.testing.assert_close(scores, h0 + 0.5 * (hr.max(0).values - h0))
    torch.testing.assert_close(logits, 10.0 * f @ t.t())
    # λ = 1: the worst-case entropy; one-hot logits have zero entropy
    assert torch.allclose(stss_scores(f, 10.0, t, tr, lam=1.0)[0], hr.max(0).values)
    assert entropy(torch.tensor([[100.0, 0.0, 0.0]])).item() < 1e-6
    assert math.isclose(entropy(torch.zeros(1, 4)).item(), math.log(4), rel_tol=1e-6)
    # marginal entropy: two confident but opposite views are maximally uncertain together
    assert math.isclose(marginal_entropy(torch.tensor([[50.0, 0.0], [0.0, 50.0]])).item(), math.log(2), rel_tol=1e-4)


def test_perturbations_have_radius_rho_and_are_seeded():
    ctx = torch.randn(4, 16)
    d = perturb_context(ctx, 5, 0.7, seed=3)
    assert d.shape == (5, 4, 16)
    torch.testing.assert_close((d - ctx).flatten(1).norm(dim=1), torch.full((5,), 0.7))
    torch.testing.assert_close(d, perturb_context(ctx, 5, 0.7, seed=3))


def test_vote_is_a_majority_with_probability_tiebreak():
    logits = torch.tensor([[[5.0, 0, 0], [4.0, 0, 0], [0, 9.0, 0], [0, 0, 1.0]]])
    assert vote(logits, torch.tensor([[0, 1, 2]])).item() == 0           # 2 votes beat 1
    assert vote(logits, torch.tensor([[2, 3]])).item() == 1              # tie: the more confident view


def test_stss_has_no_gradient_no_update_and_caches_perturbed_prompts(setup):
    model, feats = setup
    before = {k: v.clone() for k, v in model.state_dict().items()}
    calls, grad_seen = [], []

    def record(module, inputs, output):
        calls.append(inputs[0].shape[0])
        grad_seen.append(torch.is_grad_enabled())

    hook = model.clip.transformer.register_forward_hook(record)
    try:
        stss = STSS("fga", model.ctx, r=3, keep=4, rho=0.5)
        stss.prepare(model)
        assert len(calls) == 4 and all(c == len(CLASSES) for c in calls)   # p and R = 3 perturbed sets, once
        out = stss.head(model, feats)
        out2 = stss.head(model, feats)
        stss.prepare(model)                                               # same class set: cached
        assert len(calls) == 4
        model.class_names = CLASSES[:3]                                   # new class set: encoded again
        stss.prepare(model)
        assert len(calls) == 8
        model.class_names = CLASSES
        stss.prepare(model)
    finally:
        hook.remove()
    assert not any(grad_seen)
    assert out.pred.shape == (3,) and out.kept.shape == (3, 4) and out.scores.shape == (3, 16)
    assert torch.equal(out.pred, out2.pred)
    # the kept views are those with the lowest scores, and the prediction is their vote
    assert torch.equal(out.kept.sort(1).values, out.scores.argsort(1)[:, :4].sort(1).values)
    logits = model.logits(feats, stss.text)
    assert torch.equal(out.pred, vote(logits, out.kept))
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k


def test_zero_keeps_the_most_confident_views(setup):
    model, feats = setup
    zero = Zero("zero", model.ctx, keep=0.3)
    zero.prepare(model)
    out = zero.head(model, feats)
    assert out.kept.shape == (3, 4)  # int(16 * 0.3)
    ent = entropy(model.logits(feats, zero.text))
    assert torch.equal(out.kept.sort(1).values, ent.argsort(1)[:, :4].sort(1).values)


def test_tpt_resets_per_image_and_chunked_gradient_is_exact(setup):
    model, feats = setup
    ctx0 = model.ctx.detach().clone()
    full, chunked = TPT("tpt", ctx0, lr=0.05), TPT("tpt", ctx0, lr=0.05, class_chunk=3)
    grads = []
    for t in (full, chunked):
        p = torch.nn.Parameter(ctx0.clone())
        with torch.enable_grad():
            t._loss_grad(model, p, feats[0])
        grads.append(p.grad)
    assert grads[0].abs().max() > 1e-4
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-3, atol=1e-5 * float(grads[0].abs().max()))
    a = full.head(model, feats)
    b = full.head(model, feats[[2, 1, 0]])  # order of images does not matter: prompt reset per image
    assert torch.equal(a.pred, b.pred[[2, 1, 0]])
    assert torch.equal(model.ctx, ctx0)
    # one step lowers the marginal entropy of the kept views (the quantity TPT minimises)
    p = torch.nn.Parameter(ctx0.clone())
    opt = torch.optim.AdamW([p], lr=1e-3, weight_decay=0.0)
    with torch.enable_grad():
        before = full._loss_grad(model, p, feats[0])
    opt.step()
    with torch.enable_grad():
        after = full._loss_grad(model, torch.nn.Parameter(p.detach().clone()), feats[0])
    assert after < before
