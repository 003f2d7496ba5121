"""CODA-Prompt baseline: prefix attention, component partitions, checkpoints and the CLI (its FLOPs:
test_hippotune_model.py)."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from timm.models.vision_transformer import Block
from torch import nn

import visionzoo
from visionzoo.cli import eval_main, train_main
from visionzoo.errors import VisionZooError
from visionzoo.methods.hippotune import CodaPromptViT, PrefixBlock
from visionzoo.methods.hippotune.coda import default_prompt_layers, orthonormal_rows

from .conftest import TINY_VIT, TINY_VIT_ARGS

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _coda(**kw) -> CodaPromptViT:
    torch.manual_seed(0)
    kw = {"num_classes": 6, "pool_size": 12, "num_tasks": 3, **TINY_VIT, **kw}
    return visionzoo.create_model("coda_vit_tiny_partworld", **kw)


def _block() -> Block:
    torch.manual_seed(0)
    return Block(dim=32, num_heads=2, qkv_bias=True).eval()


@pytest.mark.parametrize("fused", [True, False])
def test_prefix_block_equals_attention_over_extra_tokens(fused):
    blk = _block()
    blk.attn.fused_attn = fused
    wrapped = PrefixBlock(blk)
    x, extra = torch.randn(2, 5, 32), torch.randn(2, 3, 32)
    with torch.no_grad():
        torch.testing.assert_close(wrapped(x), blk(x))
        empty = torch.zeros(2, 0, 32)
        torch.testing.assert_close(wrapped(x, prefix=(empty, empty)), blk(x))
        # prefixes = the keys/values the block itself would make of extra tokens: the first N outputs of
        # the block over [x ‖ extra] (extra tokens enter attention only; the MLP is per token)
        _, k, v = blk.attn.qkv(blk.norm1(extra)).chunk(3, dim=-1)
        torch.testing.assert_close(wrapped(x, prefix=(k, v)), blk(torch.cat([x, extra], dim=1))[:, :5])


def test_prefix_block_refuses_a_block_it_cannot_prefix():
    with pytest.raises(VisionZooError, match="pre-norm ViT Block"):
        PrefixBlock(nn.Linear(4, 4))


def test_default_layers_scale_the_papers_first_5_of_12():
    assert default_prompt_layers(12) == [0, 1, 2, 3, 4]
    assert default_prompt_layers(8) == [0, 1, 2]
    assert default_prompt_layers(2) == [0]


def test_orthonormal_rows_are_orthogonal_to_the_old_ones():
    old = torch.randn(5, 16)
    new = orthonormal_rows(old, 4, torch.Generator().manual_seed(0))
    torch.testing.assert_close(new @ new.t(), torch.eye(4), atol=1e-5, rtol=0)
    assert (new @ old.t()).abs().max() < 1e-5
    with pytest.raises(VisionZooError, match="smaller pool_size"):
        orthonormal_rows(old, 12)


def test_each_task_trains_only_its_components_and_starts_them_orthogonal():
    m = _coda().train()
    assert [isinstance(b, PrefixBlock) for b in m.vit.blocks] == [True, False]
    assert {n for n, p in m.named_parameters() if p.requires_grad} == {"components", "keys", "attention",
                                                                       "head.weight"}
    before = m.keys.detach().clone()
    m.begin_task(1, seed=3)
    assert torch.equal(m.keys[:, :4], before[:, :4])  # task 0's components are kept
    keys = m.keys[0, :8].detach()
    torch.testing.assert_close(keys @ keys.t(), torch.eye(8), atol=1e-5, rtol=0)
    x = torch.randn(4, 3, 32, 32)
    logits, aux = m(x, return_aux=True)
    (logits.logsumexp(1).sum() + aux["ortho"]).backward()
    for p in (m.components, m.keys, m.attention):
        rows = p.grad.flatten(2).abs().sum((0, 2))
        assert rows[:4].sum() == 0 and rows[4:8].sum() > 0 and rows[8:].sum() == 0  # [0,4) frozen, [8,12) unused
    # the redraw is seeded: the same task and seed give the same components
    again = _coda()
    again.begin_task(1, seed=3)
    assert torch.equal(again.components, m.components)


def test_eval_reads_the_components_of_every_task_seen():
    m = _coda().eval()
    m.num_seen.fill_(4)
    x = torch.randn(2, 3, 32, 32)
    m.begin_task(1)
    with torch.no_grad():
        m.keys[:, 8:] = torch.randn_like(m.keys[:, 8:])  # task 2's rows: only the slicing keeps them out
        m.attention[:, 8:] = torch.randn_like(m.attention[:, 8:])
        out = m(x)
        m.components[:, 4:8] += 1.0  # task 1's components change the prediction ...
        assert not torch.allclose(m(x), out)
        m.components[:, 8:] += 1.0  # ... task 2's (not begun) do not
        changed = m(x)
        m.components[:, 8:] -= 1.0
        torch.testing.assert_close(m(x), changed)
    assert torch.isinf(out[:, 4:]).all()


def test_checkpoint_round_trip_keeps_the_task(tmp_path):
    m = _coda().eval()
    m.begin_task(1, seed=0)
    m.num_seen.fill_(4)
    visionzoo.save_pretrained(m, tmp_path / "ckpt")
    loaded = visionzoo.load_pretrained(tmp_path / "ckpt").eval()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), m(x))
    assert int(loaded.task) == 1 and loaded.config.num_tasks == 3


@pytest.mark.parametrize("kw, match", [({"prompt_length": 5}, "even"), ({"num_tasks": 20}, "num_tasks"),
                                       ({"pool_size": 100}, "at most the ViT width")])
def test_bad_configs_are_refused(kw, match):
    with pytest.raises(VisionZooError, match=match):
        _coda(**kw)


DATA = ["--dataset", "random-blobs", "--dataset-args", "num_classes=6", "length=24", "--tasks", "3"]


def _train(out, *extra):
    return ["coda", "--model", "vit_tiny_partworld", "--model-args", *TINY_VIT_ARGS, "pool_size=12", *DATA,
            "--backbone-pretrained", "false", "--epochs", "1", "--batch-size", "8", "--lr", "0.01", "--seed", "1",
            "--quiet", "--output-dir", str(out), *extra]


def test_coda_run_resume_and_eval(tmp_path, capsys):
    run = tmp_path / "run"
    assert train_main(_train(run, "--ortho-mu", "0.1")) == 0
    res = json.loads((run / "results.json").read_text())
    assert res["model"] == "coda_vit_tiny_partworld" and [len(r) for r in res["accuracy_matrix"]] == [1, 2, 3]
    assert res["flops"]["forward_gflops"] > 0
    # a crash after task 0: --resume redraws task 1's components alike and reproduces the run
    state = json.loads((run / "cl_state.json").read_text())
    state.update(done=0, matrix=state["matrix"][:1], curve=state["curve"][:1])
    (run / "cl_state.json").write_text(json.dumps(state))
    for d in ("task_01", "task_02"):
        shutil.rmtree(run / d)
    assert train_main(_train(run, "--ortho-mu", "0.1", "--resume", str(run))) == 0
    assert json.loads((run / "results.json").read_text())["accuracy_matrix"] == res["accuracy_matrix"]

    ev = tmp_path / "eval"
    ckpt = str(run / "task_02" / "final")
    common = ["coda", "--model", "coda_vit_tiny_partworld", *DATA, "--batch-size", "8", "--quiet"]
    assert eval_main([*common, "--output-dir", str(ev), "--pretrained", ckpt]) == 0
    row = json.loads((ev / "results.json").read_text())["rows"][0]
    assert row["acc1"] == pytest.approx(res["accuracy_curve"][-1])
    # a checkpoint split over 3 tasks cannot run a 2-task protocol
    other = [a if a != "3" else "2" for a in common]
    assert eval_main([*other, "--output-dir", str(tmp_path / "e2"), "--pretrained", ckpt]) == 2
    assert "splits its prompt components over 3" in capsys.readouterr().err
