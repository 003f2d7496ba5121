"""The streaming shared-covariance LDA of the continual learners (``--classifier lda``)."""

from __future__ import annotations

import json

import pytest
import torch

from visionzoo.checkpoint import from_pretrained
from visionzoo.cli import eval_main, train_main
from visionzoo.methods.hippotune.lda import StreamingLDA

from .test_hippotune_cli import _args, _eval_args

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _blobs(n: int = 200, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Three classes whose means differ along a direction of small variance, with a large shared
    variance along another: nearest-mean gets confused, a covariance-aware classifier does not."""
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(3).repeat_interleave(n)
    x = torch.randn(3 * n, 4, generator=g) * torch.tensor([0.2, 5.0, 1.0, 1.0])
    x[:, 0] += y.float()
    x[:, 1] += 2.0 * y.float()  # the classes also differ where the noise is large
    return x, y


def test_streaming_statistics_equal_a_joint_fit_and_use_the_covariance():
    x, y = _blobs()
    joint = StreamingLDA(4, 3, shrinkage=0.0)
    joint.update(x, y)
    streamed = StreamingLDA(4, 3, shrinkage=0.0)
    for c in range(3):  # one class per "task", in two chunks each
        sel = (y == c).nonzero().squeeze(1)
        streamed.update(x[sel[:50]], y[sel[:50]])
        streamed.update(x[sel[50:]], y[sel[50:]])
    w1, b1 = joint.solve()
    w2, b2 = streamed.solve()
    assert torch.allclose(w1, w2) and torch.allclose(b1, b2)

    # the solve is the textbook LDA
    means = torch.stack([x[y == c].double().mean(0) for c in range(3)])
    centred = x.double() - means[y]
    cov = centred.t() @ centred / len(x)
    w = torch.linalg.solve(cov, means.t()).t()
    assert torch.allclose(w1, w, atol=1e-8) and torch.allclose(b1, -0.5 * (w * means).sum(1), atol=1e-8)

    xt, yt = _blobs(seed=1)
    lda_acc = (joint(xt).argmax(1) == yt).float().mean()
    ncm = torch.cdist(xt, means.float()).argmin(1)
    assert lda_acc > 0.95 and lda_acc > (ncm == yt).float().mean() + 0.2

    fresh = StreamingLDA(4, 3, shrinkage=0.0)
    fresh.load_state_dict(joint.state_dict())
    assert torch.equal(fresh(xt), joint(xt))
    with pytest.raises(ValueError, match="shrinkage"):
        StreamingLDA(4, 3, shrinkage=-1.0)


@pytest.mark.parametrize("task", ["simplecil", "hippotune"])
def test_lda_classifier_from_the_cli(tmp_path, task):
    run = tmp_path / "run"
    extra = ["--classifier", "lda"] + (["--memory-partitions", "1"] if task == "hippotune" else [])
    model = f"{task}_vit_tiny_partworld"
    assert train_main(_args(task, run, *extra, model=model)) == 0
    res = json.loads((run / "results.json").read_text())
    final = from_pretrained(str(run / "task_02" / "final"))
    assert final.lda is not None and final.classifier == "lda"
    assert int((final.lda.counts > 0).sum()) == 6  # every class of the three tasks has statistics
    ev = tmp_path / "eval"
    argv = _eval_args(ev, "--pretrained", str(run / "task_02" / "final"))
    argv[0], argv[argv.index("--model") + 1] = task, model
    assert eval_main(argv) == 0
    row = json.loads((ev / "results.json").read_text())["rows"][0]
    assert row["acc1"] == pytest.approx(res["accuracy_curve"][-1])
