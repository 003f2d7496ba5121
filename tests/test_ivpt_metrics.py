"""Consistency / stability on hand-made cases, and the IVPT losses and warps."""

from __future__ import annotations

import math

import torch

from visionzoo.methods.ivpt.equivariance import AffineParams, sample_affine, warp, warp_back
from visionzoo.methods.ivpt.interp_metrics import (
    consistency_score,
    keypoints_in_box,
    part_hits,
    peak_locations,
    perturb,
    stability_score,
)
from visionzoo.methods.ivpt.losses import (
    consistency_loss,
    entropy_loss,
    equivariance_loss,
    orthogonality_loss,
    per_image_presence_loss,
    presence_loss,
)

IMG = 64  # images 64 px, maps 8x8 (patch 8)


def _scene(n: int, gen: torch.Generator):
    """Objects in random boxes with 5 parts at random places inside."""
    x0 = torch.randint(0, 20, (n,), generator=gen).float()
    y0 = torch.randint(0, 20, (n,), generator=gen).float()
    side = torch.randint(32, 44, (n,), generator=gen).float()
    boxes = torch.stack([x0, y0, x0 + side, y0 + side], 1)
    rel = torch.rand(n, 5, 2, generator=gen) * 0.9 + 0.05
    kp = torch.cat([boxes[:, None, :2] + rel * side[:, None, None], torch.ones(n, 5, 1)], -1)
    return boxes, kp


def _map_peaking_at(xy: torch.Tensor) -> torch.Tensor:
    """[N, 8, 8] maps with a sharp bump at image point xy [N, 2]."""
    centres = (torch.arange(8).float() + 0.5) * 8
    d2 = (centres[None, None, :] - xy[:, 0, None, None]) ** 2 + (centres[None, :, None] - xy[:, 1, None, None]) ** 2
    return torch.exp(-d2 / 20.0)


def _hits(maps, boxes, kp):
    peaks = peak_locations(maps, boxes, (IMG, IMG))
    yx, present = keypoints_in_box(kp, boxes)
    return part_hits(peaks, yx, present), present


def test_prototype_on_one_part_is_fully_consistent_and_random_is_near_chance():
    gen = torch.Generator().manual_seed(0)
    n_cls, per = 10, 12
    boxes, kp = _scene(n_cls * per, gen)
    labels = torch.arange(n_cls).repeat_interleave(per)
    # prototype 0 peaks on part 2 of every image; prototype 1 on a random point of the box
    on_part = _map_peaking_at(kp[:, 2, :2])
    rnd = boxes[:, :2] + torch.rand(len(boxes), 2, generator=gen) * (boxes[:, 2:] - boxes[:, :2])
    at_random = _map_peaking_at(rnd)
    hits, present = _hits(torch.stack([on_part, at_random], 1), boxes, kp)
    assert hits[:, 0, 2].all()
    score, table = consistency_score(hits, present, labels)
    assert table[:, 0].all()  # 100 % for the part-locked prototype
    assert table[:, 1].float().mean() <= 0.2  # a random peak rarely hits one part in 80 % of images
    only_random, _ = consistency_score(hits[:, 1:], present, labels)
    assert only_random <= 20.0
    assert score == 100.0 * table.float().mean().item()


def test_consistency_threshold_and_missing_parts():
    hits = torch.zeros(5, 1, 3, dtype=torch.bool)
    present = torch.ones(5, 3, dtype=torch.bool)
    hits[:4, 0, 1] = True  # 4 of 5 images: exactly 80 %
    labels = torch.zeros(5, dtype=torch.long)
    assert consistency_score(hits, present, labels)[0] == 100.0
    hits[3, 0, 1] = False  # 60 %
    assert consistency_score(hits, present, labels)[0] == 0.0
    present[3:, 1] = False  # part 1 absent from 2 images: 3 of 3 images that show it
    assert consistency_score(hits, present, labels)[0] == 100.0


def test_stability_counts_unchanged_hit_vectors():
    gen = torch.Generator().manual_seed(1)
    hits = torch.rand(40, 4, 5, generator=gen) > 0.5
    labels = torch.arange(4).repeat_interleave(10)
    assert stability_score(hits, hits.clone(), labels) == 100.0
    flipped = hits.clone()
    flipped[::2, :, 0] = ~flipped[::2, :, 0]  # every second image changes for every prototype
    assert math.isclose(stability_score(hits, flipped, labels), 50.0)
    other = torch.rand(40, 4, 5, generator=gen) > 0.5
    assert stability_score(hits, other, labels) < 15.0  # independent random hit vectors rarely agree


def test_peaks_and_keypoints_share_the_box_frame():
    boxes = torch.tensor([[16.0, 8.0, 48.0, 40.0]])
    kp = torch.tensor([[[16.0, 8.0, 1], [47.9, 39.9, 1], [50.0, 20.0, 1], [30.0, 20.0, 0]]])
    yx, present = keypoints_in_box(kp, boxes)
    assert yx[0, 0].tolist() == [0, 0] and yx[0, 1].tolist() == [223, 223]
    assert present[0].tolist() == [True, True, False, False]  # outside the box / invisible
    maps = torch.zeros(1, 1, 8, 8)
    maps[0, 0, 1, 2] = 1.0  # cell centred on image point (20, 12)
    peak = peak_locations(maps, boxes, (64, 64))[0, 0]
    # (12 - 8) / 32 * 224 = 28, (20 - 16) / 32 * 224 = 28; a tie between two output pixels goes to the first
    assert peak.tolist() in ([27, 27], [28, 28])
    hits = part_hits(peak_locations(maps, boxes, (64, 64)), yx, present)
    assert hits[0, 0].tolist() == [True, False, False, False]


def test_perturbation_is_clipped_and_seeded():
    x = torch.zeros(2, 3, 8, 8)
    a = perturb(x, generator=torch.Generator().manual_seed(0))
    b = perturb(x, generator=torch.Generator().manual_seed(0))
    assert torch.equal(a, b) and a.abs().max() <= 0.25 and a.std() > 0.1


def test_losses_on_known_maps():
    maps = torch.softmax(torch.randn(2, 4, 6, 6) * 3, dim=1)
    assert consistency_loss(maps, maps).abs() < 1e-6
    assert consistency_loss(torch.full_like(maps, 0.25), maps) > 0.1
    one_hot = torch.zeros(2, 4, 6, 6)
    one_hot[:, 0] = 1
    assert entropy_loss(one_hot) < 1e-3 and math.isclose(entropy_loss(torch.full_like(maps, 0.25)).item(),
                                                         math.log(4), rel_tol=1e-4)
    present = torch.zeros(2, 4, 6, 6)
    present[:, :3, 1:4, 1:4] = 1.0  # every foreground part fully present in a 3x3 patch
    assert presence_loss(present).abs() < 1e-6 and presence_loss(one_hot[:, [3, 1, 2, 0]]) == 1.0
    feats = torch.eye(5)[None].repeat(2, 1, 1)[:, :, :3]  # [B, D=5, K+1=3] orthonormal columns
    assert orthogonality_loss(feats) < 1e-6
    assert orthogonality_loss(torch.ones(2, 5, 3)) > 0.5


def test_per_image_presence_needs_every_part_in_every_image():
    maps = torch.zeros(2, 3, 6, 6)
    maps[:, -1] = 1.0
    maps[0, 0, 1:4, 1:4], maps[0, -1, 1:4, 1:4] = 1.0, 0.0  # part 0 only in image 0
    maps[1, 1, 1:4, 1:4], maps[1, -1, 1:4, 1:4] = 1.0, 0.0  # part 1 only in image 1
    assert presence_loss(maps).abs() < 1e-6  # the batch maximum is satisfied ...
    assert math.isclose(per_image_presence_loss(maps).item(), 0.5)  # ... each image lacks one of two parts


def test_warp_back_undoes_warp_and_equivariance_loss_is_zero_for_equivariant_maps():
    yy, xx = torch.meshgrid(torch.arange(16.0), torch.arange(16.0), indexing="ij")
    centres = torch.tensor([[6.0, 7.0], [9.0, 6.0], [7.0, 9.5], [8.0, 8.0]])  # smooth blobs, one per channel
    maps = torch.stack([torch.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 8.0) for cy, cx in centres])
    maps = maps[None].repeat(3, 1, 1, 1)
    ident = AffineParams(angle=torch.zeros(3), shift=torch.zeros(3, 2), scale=torch.ones(3))
    torch.testing.assert_close(warp(maps, ident), maps)
    params = sample_affine(3, degrees=30, translate=0.05, scale=(0.9, 1.1), generator=torch.Generator().manual_seed(0))
    back = warp_back(warp(maps, params), params)
    assert (back - maps).abs().mean() < 0.03
    assert equivariance_loss(maps, warp(maps, params), params) < 0.05
    assert equivariance_loss(maps, maps.flip(-1), params) > 0.2
