"""Data-driven (k-means) prototype init of IVPT."""

from __future__ import annotations

import torch

import visionzoo
from visionzoo.methods.ivpt.prototypes import kmeans, kmeans_prototypes

from .conftest import TINY_VIT


def test_kmeans_finds_separated_clusters():
    gen = torch.Generator().manual_seed(0)
    centres = torch.tensor([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    x = torch.cat([c + 0.1 * torch.randn(50, 2, generator=gen) for c in centres])
    found = kmeans(x, 3, generator=torch.Generator().manual_seed(1))
    dist = torch.cdist(found, centres)
    assert (dist.min(dim=0).values < 0.2).all()  # every true centre recovered


def test_background_prototype_is_the_border_cluster():
    # features [1, 2, 6, 6]: border ring at (5, 5), an inner 4x4 block split into two parts
    e = torch.full((1, 2, 6, 6), 5.0)
    e[0, :, 1:5, 1:3] = torch.tensor([-5.0, 0.0])[:, None, None]
    e[0, :, 1:5, 3:5] = torch.tensor([0.0, -5.0])[:, None, None]
    protos = kmeans_prototypes(e, 3, generator=torch.Generator().manual_seed(0))
    assert torch.allclose(protos[-1], torch.tensor([5.0, 5.0]))
    fg = {tuple(p.round().tolist()) for p in protos[:-1]}
    assert fg == {(-5.0, 0.0), (0.0, -5.0)}


def test_model_init_from_data_sets_every_stage():
    torch.manual_seed(0)
    model = visionzoo.create_model("ivpt_vit_tiny_patch16_224", num_classes=3, n_pro=[5, 4, 3], **TINY_VIT)
    before = [s.prototypes.detach().clone() for s in model.stages]
    x = torch.randn(2, 3, TINY_VIT["img_size"], TINY_VIT["img_size"])
    model.train()
    model.init_prototypes_from_data(x, seed=0)
    assert model.training  # mode restored
    for b, s in zip(before, model.stages, strict=True):
        assert not torch.allclose(b, s.prototypes)
    again = visionzoo.create_model("ivpt_vit_tiny_patch16_224", num_classes=3, n_pro=[5, 4, 3], **TINY_VIT)
    again.load_state_dict(model.state_dict())
    for s in again.stages:
        s.prototypes.data.normal_()
    again.init_prototypes_from_data(x, seed=0)
    for a, s in zip(again.stages, model.stages, strict=True):
        assert torch.allclose(a.prototypes, s.prototypes)  # deterministic for a seed
