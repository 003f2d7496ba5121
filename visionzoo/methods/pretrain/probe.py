"""Before-adaptation evaluation of a backbone on PartWorld downstream classes, per style.

* ViT: linear probe — features of the frozen backbone (pre-logits), a multinomial logistic
  regression (scikit-learn, standardised features) fitted on source-style training images of the
  downstream classes, accuracy on the test split of every style.
* CLIP: zero-shot — cosine similarity to class prompts, single prompt ("a photo of a {}.") and an
  ensemble of one prompt per style phrase ("a sketch of a {}.", ...).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import torch
from torch import Tensor, nn

from ...data import build_dataset
from ...data.partworld_styles import STYLES, get_style
from ...engine.data import SeededItems
from ...engine.eval_run import markdown_table
from ...factory import create_model, create_transforms
from .clip_model import OpenClip, _is_open_clip


def _load(args: argparse.Namespace) -> nn.Module:
    pretrained = args.pretrained if args.pretrained is not None else True
    if _is_open_clip(args.model):
        return create_model(f"clip_{args.model}", backbone_pretrained=pretrained, **(args.model_args or {}))
    return create_model(f"classifier_{args.model}", backbone_pretrained=pretrained, num_classes=0,
                        **(args.model_args or {}))


@torch.inference_mode()
def features(model: nn.Module, dataset, batch_size: int = 256) -> tuple[Tensor, Tensor]:
    """Frozen features ``[N, D]`` and labels ``[N]`` of a dataset (ViT pre-logits or CLIP image embeddings)."""
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size)
    feats, labels = [], []
    for images, y in loader:
        f = model.net.encode_image(images, normalize=True) if isinstance(model, OpenClip) else model.net(images)
        feats.append(f.float())
        labels.append(y)
    return torch.cat(feats), torch.cat(labels)


def _split(cfg, args, split: str, per_class: int, style: str, transform):
    raw = build_dataset(args.dataset, root=args.data_root, split=split, classes="downstream", style=style,
                        image_size=cfg.image_size, images_per_class=per_class, seed=args.seed,
                        **(args.dataset_args or {}))
    return raw, SeededItems(raw, transform, args.seed)


def linear_probe(model, cfg, args, log) -> list[dict[str, Any]]:
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    tf = create_transforms(model)
    _, train = _split(cfg, args, "train", cfg.probe_images_per_class, "clean", tf)
    x, y = features(model, train)
    scaler = StandardScaler().fit(x.numpy())
    clf = LogisticRegression(C=0.5, max_iter=3000).fit(scaler.transform(x.numpy()), y.numpy())
    rows = []
    for style in cfg.eval_styles:
        _, test = _split(cfg, args, "test", cfg.test_images_per_class, style, tf)
        xt, yt = features(model, test)
        acc = 100.0 * float((clf.predict(scaler.transform(xt.numpy())) == yt.numpy()).mean())
        rows.append({"style": style, "linear_probe_acc1": acc, "images": len(yt)})
        log.info(f"{style:13s} linear probe {acc:6.2f}%")
    return rows


def zero_shot(model: OpenClip, cfg, args, log) -> list[dict[str, Any]]:
    tf = create_transforms(model)
    rows = []
    text_single = text_ens = None
    for style in cfg.eval_styles:
        raw, test = _split(cfg, args, "test", cfg.test_images_per_class, style, tf)
        if text_single is None:
            names = list(raw.classes)
            phrases = [get_style(s).phrase for s in STYLES]
            text_single = model.class_text_features([[f"a photo of a {n}."] for n in names])
            text_ens = model.class_text_features([[f"{p} a {n}." for p in phrases] for n in names])
        x, y = features(model, test)
        single = 100.0 * float(((x @ text_single.T).argmax(1) == y).float().mean())
        ens = 100.0 * float(((x @ text_ens.T).argmax(1) == y).float().mean())
        rows.append({"style": style, "zero_shot_acc1": single, "zero_shot_ensemble_acc1": ens, "images": len(y)})
        log.info(f"{style:13s} zero-shot {single:6.2f}%  ensemble {ens:6.2f}%")
    return rows


def run_backbone_eval(cfg, args: argparse.Namespace, log) -> dict[str, Any]:
    """Evaluate ``args.model`` with ``args.pretrained`` weights; writes results.json and results.md."""
    t0 = time.time()
    model = _load(args).eval()
    rows = zero_shot(model, cfg, args, log) if isinstance(model, OpenClip) else linear_probe(model, cfg, args, log)
    keys = [k for k in rows[0] if k.endswith("acc1")]
    shifted = [r for r in rows if r["style"] != "clean"]
    if shifted:
        rows.append({"style": "shifted mean", **{k: sum(r[k] for r in shifted) / len(shifted) for k in keys}})
    out = {"task": "pretrain-eval", "model": args.model, "weights": str(args.pretrained), "classes": "downstream",
           "chance": 1.0, "rows": rows, "seconds": round(time.time() - t0, 1)}
    if log.out_dir is not None:
        log.write_json("results.json", out)
        (log.out_dir / "results.md").write_text(markdown_table(rows))
        log.info(f"results: {log.out_dir / 'results.json'} and {log.out_dir / 'results.md'}")
    return out


__all__ = ["run_backbone_eval", "features"]
