"""The engine's SAM step against a hand-computed update, and through train.py."""

from __future__ import annotations

import json

import pytest
import torch

from visionzoo.cli import train_main
from visionzoo.engine.sam import sam_backward

from .conftest import TINY_VIT_ARGS


def _quartic(p):
    return (p ** 4).sum() + (p[0] * p[1])


@pytest.mark.parametrize("lam", [1.0, 0.5])
def test_sam_gradient_matches_definition(lam):
    p = torch.nn.Parameter(torch.tensor([0.7, -1.3, 0.2]))
    rho = 0.3
    grad = sam_backward(lambda: _quartic(p), [p], rho=rho, lam=lam) and p.grad.clone()
    q = p.detach().clone().requires_grad_(True)
    (g0,) = torch.autograd.grad(_quartic(q), q)
    eps = rho * g0 / g0.norm()
    r = (q.detach() + eps).requires_grad_(True)
    (g1,) = torch.autograd.grad(_quartic(r), r)
    torch.testing.assert_close(grad, lam * g1 + (1 - lam) * g0)
    torch.testing.assert_close(p.detach(), torch.tensor([0.7, -1.3, 0.2]))  # parameters restored


def test_train_with_sam_runs(tmp_path):
    out = tmp_path / "sam"
    code = train_main(["classify", "--model", "classifier_vit_tiny_patch16_224", "--model-args", *TINY_VIT_ARGS,
                       "--epochs", "1", "--batch-size", "16", "--sam-rho", "0.05", "--quiet",
                       "--output-dir", str(out)])
    assert code == 0
    assert json.loads((out / "results.json").read_text())["steps"] == 4
