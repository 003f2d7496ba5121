"""HippoTune's retrieval loop and the block wrapper: early stop, truncation, masking, losses."""

from __future__ import annotations

import math

import pytest
import torch
from timm.models.vision_transformer import Block

from visionzoo.methods.hippotune.layer import RetrievalBlock
from visionzoo.methods.hippotune.retrieval import IterativeRetrieval, retrieval_entropy

pytestmark = pytest.mark.usefixtures("one_torch_thread")

def _memory(**kw) -> IterativeRetrieval:
    torch.manual_seed(0)
    args = dict(dim=16, memory_size=8, t_max=3, temperature=0.1, eps=0.0)
    args.update(kw)
    return IterativeRetrieval(**args)


def test_loop_runs_t_max_steps_and_weights_are_distributions():
    mem = _memory()
    out = mem(torch.randn(5, 16))
    assert out.tokens.shape == (5, 3, 16) and out.valid.shape == (5, 3) and out.weights.shape == (5, 3, 8)
    assert out.valid.all()
    torch.testing.assert_close(out.weights.sum(-1), torch.ones(5, 3))
    # the feedback moves the query: later steps retrieve something else than the first
    assert not torch.allclose(out.tokens[:, 0], out.tokens[:, 1])
    # fused token = retrieved value when d_v = d
    torch.testing.assert_close(out.tokens, out.weights @ mem.values)


def test_t_max_one_is_a_single_retrieval():
    mem = _memory(t_max=1)
    out = mem(torch.randn(3, 16))
    assert out.steps == 1
    out.tokens.sum().backward()
    assert mem.proj.weight.grad is None  # no feedback step, so P is unused


def test_top_k_keeps_k_slots():
    out = _memory(top_k=2)(torch.randn(4, 16))
    assert ((out.weights > 0).sum(-1) == 2).all()


def test_value_dim_other_than_width_fuses_projected_tokens():
    mem = _memory(value_dim=5)
    out = mem(torch.randn(2, 16))
    assert out.tokens.shape == (2, 3, 16)
    torch.testing.assert_close(out.tokens, mem.proj(out.weights @ mem.values))


def _first_change(mem: IterativeRetrieval, q: torch.Tensor) -> torch.Tensor:
    """Relative change ‖v² − v¹‖ / ‖v¹‖ of each sample."""
    with torch.no_grad():
        v1 = mem.attend(q) @ mem.values
        q2 = mem.alpha * q + (1 - mem.alpha) * mem.proj(v1)
        v2 = mem.attend(q2) @ mem.values
    return (v2 - v1).norm(dim=-1) / v1.norm(dim=-1)


def test_early_stop_is_per_sample_and_result_does_not_depend_on_the_batch():
    torch.manual_seed(1)
    block = Block(dim=16, num_heads=2).eval()
    mem = _memory()
    x = torch.randn(2, 5, 16)
    layer = RetrievalBlock(block, mem, num_prefix_tokens=1, query="cls")
    change = _first_change(mem, layer.make_query(x))
    assert change[0] != change[1]
    mem.eps = float(change.mean())  # one sample stops after step 2, the other runs on
    with torch.no_grad():
        both = layer(x)
        valid = layer.last.valid
        slow = int(change.argmax())
        fast = 1 - slow
        assert valid[slow].tolist() == [True, True, True] and valid[fast].tolist() == [True, True, False]
        alone = layer(x[fast:fast + 1])
        assert layer.last.steps == 2
    torch.testing.assert_close(both[fast:fast + 1], alone, atol=1e-5, rtol=1e-5)
    assert both.shape == x.shape


def test_truncated_backprop_reaches_the_query_only_within_the_window():
    q = torch.randn(3, 16, requires_grad=True)
    _memory(grad_steps=1)(q).tokens.sum().backward()
    assert q.grad is None  # every step's query is outside the one-step window (or detached)
    q2 = torch.randn(3, 16, requires_grad=True)
    mem = _memory(grad_steps=3)
    mem(q2).tokens.pow(2).sum().backward()
    assert q2.grad is not None and q2.grad.abs().sum() > 0
    assert mem.keys.grad.abs().sum() > 0 and mem.values.grad.abs().sum() > 0 and mem.proj.weight.grad.abs().sum() > 0


def test_orthogonality_loss_and_entropy():
    mem = _memory()
    assert mem.orthogonality_loss().detach().item() < 1e-8  # orthogonal initial keys (M <= d)
    with torch.no_grad():
        mem.keys[1] = mem.keys[0]
    assert mem.orthogonality_loss().detach().item() == pytest.approx(2.0, abs=1e-4)  # one duplicated pair: 2 × 1²
    uniform = torch.full((2, 3, 8), 1 / 8)
    valid = torch.tensor([[True, True, False], [True, False, False]])
    assert float(retrieval_entropy(uniform, valid)) == pytest.approx(math.log(8), rel=1e-5)


def test_wrapper_refuses_outer_masks_and_bad_options():
    layer = RetrievalBlock(Block(dim=16, num_heads=2), _memory())
    with pytest.raises(ValueError, match="outer attention mask"):
        layer(torch.randn(1, 4, 16), attn_mask=torch.ones(1, 1, 4, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="query"):
        RetrievalBlock(Block(dim=16, num_heads=2), _memory(), query="tokens")
    with pytest.raises(ValueError, match="temperature"):
        IterativeRetrieval(16, temperature=0.0)


def test_memory_partitions_read_earlier_tasks_and_train_only_the_current_one():
    mem = _memory(memory_size=8, partitions=4, top_k=0)
    q = torch.randn(5, 16)
    assert mem(q).weights[..., 2:].abs().max() == 0  # task 0 reads partition 0 only
    mem.set_task(2)
    out = mem(q)
    assert out.weights[..., 6:].abs().max() == 0 and out.weights[..., 4:6].sum() > 0
    (out.tokens.sum() + mem.orthogonality_loss()).backward()
    rows = mem.keys.grad.abs().sum(1)
    assert torch.all(rows[:4] == 0) and torch.all(rows[4:6] > 0) and torch.all(rows[6:] == 0)
    assert torch.all(mem.values.grad[:4] == 0) and mem.values.grad[4:6].abs().sum() > 0
    assert torch.all(mem.proj.weight.grad == 0)  # P is shared: it trains in task 0 only
    mem.set_task(9)  # past the last partition: everything is read, nothing trains
    mem.zero_grad()
    mem(q).tokens.sum().backward()
    assert mem.keys.grad.abs().sum() == 0 and mem.values.grad.abs().sum() == 0
    assert "task" in mem.state_dict()
    with pytest.raises(ValueError, match="divide memory_size"):
        _memory(memory_size=8, partitions=3)
