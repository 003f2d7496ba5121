"""Part-awareness of a ViT's patch features: k-means clusters vs PartWorld's ground-truth parts.

    python benchmarks/ivpt_part_awareness.py --backbone vit_tiny_partworld \
        --weights models/vit_tiny_partworld.safetensors [--weights random] [--weights pixels] \
        [--img-size 64] [--classes 60-99] [--images-per-class 10] [--k 5 10] [--out NAME]

The question IVPT depends on: do the patch features of the frozen backbone separate *parts* (head,
limbs, tail, body) from each other, so that category-agnostic prototypes can claim them?
For each image of the PartWorld downstream test split (never seen by the backbones), each patch
gets the label of the ground-truth part covering most of its pixels; patches that are mostly
background are dropped. The features ``LN_final(tokens)`` of the blocks IVPT reads (the inputs
of its prompted blocks and the last block's output) of all foreground patches of all images are
clustered with k-means (shared across images, like IVPT's prototypes), and the clusters are
compared with the part labels:

* purity: fraction of patches whose cluster's majority part is their part (baseline: the share of
  the most common part, what one cluster per image would score);
* NMI: normalised mutual information between clusters and parts (0 = unrelated);
* part IoU: for each part, the best IoU between its patch set and one cluster, mean over the 5
  parts (the body covers most foreground patches, so purity alone barely moves: this one rewards
  a cluster that isolates the head, a limb or the tail);
* part probe: balanced accuracy (mean per-part recall, chance 20 %) of a logistic regression from
  a patch's feature to its part, fitted on the patches of half the images, tested on the other
  half — whether the part is linearly decodable at all, even if k-means does not find it.

Each layer is also scored ``-centred``: minus each image's mean foreground feature, which
removes what the object's patches share (class, instance) — the part signal that remains.
``--weights pixels`` clusters the raw patch pixels instead (a feature-free reference).
Writes ``benchmarks/results/<out>.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

import visionzoo  # noqa: F401  (registers the tiny backbones with timm)
from visionzoo.data import build_dataset


def _class_ids(spec: str) -> list[int]:
    lo, hi = (int(v) for v in spec.split("-"))
    return list(range(lo, hi + 1))


def patch_labels(masks: torch.Tensor, patch: int) -> torch.Tensor:
    """``masks`` ``[B, P, H, W]`` bool -> ``[B, h, w]`` long: majority part of each patch, -1 if mostly background."""
    b, p, h, w = masks.shape
    counts = F.avg_pool2d(masks.float(), patch)  # [B, P, h, w] fraction of each part
    frac, label = counts.max(1)
    fg = counts.sum(1) >= 0.5
    return torch.where(fg, label, torch.full_like(label, -1))


@torch.inference_mode()
def block_features(net: torch.nn.Module, x: torch.Tensor, blocks: list[int]) -> dict[int, torch.Tensor]:
    """``LN_final`` of the patch tokens after each block in ``blocks``: ``{i: [B, h, w, D]}``."""
    t = net.norm_pre(net.patch_drop(net._pos_embed(net.patch_embed(x))))
    out = {}
    h = x.shape[-2] // net.patch_embed.patch_size[0]
    for i, blk in enumerate(net.blocks):
        t = blk(t)
        if i in blocks:
            f = net.norm(t)[:, net.num_prefix_tokens:]
            out[i] = f.reshape(len(x), h, -1, f.shape[-1])
    return out


def _centre(f: torch.Tensor, fg: torch.Tensor) -> torch.Tensor:
    """Subtract each image's mean foreground feature (``f`` [B, h, w, D], ``fg`` [B, h, w]): removes what
    all patches of an object share (its class, its instance), leaving what differs between its parts."""
    w = fg[..., None].float()
    mean = (f * w).sum((1, 2), keepdim=True) / w.sum((1, 2), keepdim=True).clamp_min(1)
    return f - mean


def cluster_scores(feats: np.ndarray, labels: np.ndarray, k: int, seeds: int = 3) -> dict[str, float]:
    """Purity, NMI and mean best part IoU of k-means(``feats`` [N, D]) vs ``labels`` [N], mean over ``seeds`` runs."""
    from sklearn.cluster import KMeans
    from sklearn.metrics import normalized_mutual_info_score

    purity, nmi, iou = [], [], []
    for s in range(seeds):
        assign = KMeans(k, n_init=2, random_state=s).fit_predict(feats)
        table = np.zeros((k, labels.max() + 1))  # [clusters, parts] patch counts
        np.add.at(table, (assign, labels), 1)
        purity.append(table.max(1).sum() / len(labels))
        nmi.append(normalized_mutual_info_score(labels, assign))
        union = table.sum(1, keepdims=True) + table.sum(0, keepdims=True) - table
        iou.append((table / np.maximum(union, 1)).max(0).mean())
    return {"purity": 100 * float(np.mean(purity)), "nmi": float(np.mean(nmi)), "part_iou": 100 * float(np.mean(iou))}


def part_probe(feats: np.ndarray, labels: np.ndarray, image_of: np.ndarray) -> float:
    """Balanced test accuracy (%) of a linear patch -> part classifier, split by image (even / odd)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import balanced_accuracy_score
    from sklearn.preprocessing import StandardScaler

    train, test = image_of % 2 == 0, image_of % 2 == 1
    scaler = StandardScaler().fit(feats[train])
    clf = LogisticRegression(max_iter=500, class_weight="balanced").fit(scaler.transform(feats[train]), labels[train])
    return 100 * float(balanced_accuracy_score(labels[test], clf.predict(scaler.transform(feats[test]))))


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backbone", default="vit_tiny_partworld", help="timm ViT name")
    p.add_argument("--weights", nargs="+", default=["models/vit_tiny_partworld.safetensors"],
                   help="safetensors files to compare; 'random' = untrained init, 'pixels' = raw patch pixels")
    p.add_argument("--img-size", type=int, default=64, help="PartWorld render side = model input side")
    p.add_argument("--classes", default="60-99", help="downstream world ids lo-hi")
    p.add_argument("--images-per-class", type=int, default=10)
    p.add_argument("--blocks", type=int, nargs="+", default=[4, 5, 6, 7],
                   help="block outputs to score (4-6 = inputs of IVPT's prompted blocks 5-7, 7 = last)")
    p.add_argument("--k", type=int, nargs="+", default=[5, 10])
    p.add_argument("--out", default=None, help="results/<OUT>.json (default ivpt_part_awareness; --quick writes "
                                                "only when --out is given)")
    p.add_argument("--quick", action="store_true", help="smoke run: 2 classes x 2 images, last block, k = 5")
    args = p.parse_args(argv)
    if args.quick:
        args.classes, args.images_per_class, args.blocks, args.k = "60-61", 2, [7], [5]
    elif args.out is None:
        args.out = "ivpt_part_awareness"
    torch.set_num_threads(1)
    t0 = time.time()
    ds = build_dataset("partworld", split="test", classes=_class_ids(args.classes), image_size=args.img_size,
                       images_per_class=args.images_per_class, with_meta=True)
    items = [ds[i] for i in range(len(ds))]
    images = torch.stack([it[0] for it in items])
    masks = torch.stack([it[2]["part_masks"] for it in items])
    results: dict = {"backbone": args.backbone, "img_size": args.img_size, "classes": args.classes,
                     "images": len(items), "split": "test", "rows": []}
    import timm

    for weights in args.weights:
        if weights == "pixels":
            patch = 8
            feats = {"pixels": F.unfold(images, patch, stride=patch).transpose(1, 2)
                     .reshape(len(images), args.img_size // patch, args.img_size // patch, -1)}
        else:
            net = timm.create_model(args.backbone, pretrained=False, num_classes=0, img_size=args.img_size).eval()
            if weights != "random":
                from safetensors.torch import load_file

                state = {k: v.float() for k, v in load_file(weights).items() if not k.startswith("head.")}
                state["pos_embed"] = timm.layers.resample_abs_pos_embed(
                    state["pos_embed"], new_size=net.patch_embed.grid_size, num_prefix_tokens=net.num_prefix_tokens)
                net.load_state_dict(state, strict=True)
            patch = net.patch_embed.patch_size[0]
            cfg = net.pretrained_cfg
            x = (images - torch.tensor(cfg["mean"])[:, None, None]) / torch.tensor(cfg["std"])[:, None, None]
            feats = {f"block{i}": f for i, f in block_features(net, x, args.blocks).items()}
        labels = patch_labels(masks, patch)
        fg = labels >= 0
        y = labels[fg].numpy()
        image_of = torch.arange(len(labels))[:, None, None].expand_as(labels)[fg].numpy()
        share = np.bincount(y, minlength=5) / len(y)
        for layer, f in [*feats.items(), *((n + "-centred", _centre(f, fg)) for n, f in feats.items())]:
            x_fg = f[fg].float().numpy()
            probe = part_probe(x_fg, y, image_of)
            for k in args.k:
                row = {"weights": weights, "layer": layer, "k": k, **cluster_scores(x_fg, y, k),
                       "majority_baseline": 100 * float(share.max()), "part_probe_bal_acc": probe,
                       "fg_patches": int(len(y))}
                results["rows"].append(row)
                print(f"{Path(weights).name:32s} {layer:14s} k={k:2d} purity {row['purity']:5.1f} (baseline "
                      f"{row['majority_baseline']:.1f})  NMI {row['nmi']:.3f}  part IoU {row['part_iou']:5.1f}  "
                      f"part probe {probe:5.1f}", flush=True)
    results["part_share"] = share.round(4).tolist()
    results["seconds"] = round(time.time() - t0, 1)
    results["command"] = "python benchmarks/ivpt_part_awareness.py " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.out is None:  # a --quick smoke run
        return results
    out = Path(__file__).parent / "results" / f"{args.out}.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {out}")
    return results


if __name__ == "__main__":
    main()
