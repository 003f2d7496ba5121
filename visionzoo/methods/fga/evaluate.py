"""``eval.py fga``: FGA and its baselines on a list of evaluation sets; writes ``results.json`` and
``results.md`` (accuracy per set with the OOD average, seconds per image and peak memory per method)
and optional view figures."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from ...data import SHIFTED_STYLES, SOURCE_STYLE, TTAViews, build_dataset
from ...engine.distributed import all_reduce_sums, cleanup_distributed
from ...errors import CheckpointError, VisionZooError
from ...factory import load_pretrained
from .cocoop import CoCoOpCLIP, ConditionalPrompt, image_feature_dim
from .config import DEFAULT_CTX_INIT
from .costs import Meter
from .figure import save_views_figure
from .harness import (
    HeadSettings,
    accuracy_rows,
    build_predictors,
    cost_rows,
    evaluate_set,
    resolve_methods,
    sweep_predictors,
)
from .model import PromptCLIP
from .report import results_markdown


@dataclass
class EvalSet:
    """``dataset[:style][=root]``: a dataset name, a PartWorld style, a data folder."""

    name: str
    dataset: str
    style: str | None = None
    root: str | None = None


def parse_eval_sets(specs: Sequence[str] | None, dataset: str, data_root: str | None) -> list[EvalSet]:
    """Parse ``--eval-sets``; the default is PartWorld's source style then its shifted styles
    (for ``--dataset partworld``) or ``--dataset`` alone."""
    if not specs:
        if dataset == "partworld":
            return [EvalSet(s, "partworld", s) for s in (SOURCE_STYLE, *SHIFTED_STYLES)]
        return [EvalSet(dataset, dataset, None, data_root)]
    out = []
    for spec in specs:
        body, _, root = spec.partition("=")
        name, _, style = body.partition(":")
        if not name:
            raise VisionZooError(f"--eval-sets entry {spec!r}: expected DATASET[:STYLE][=ROOT].")
        out.append(EvalSet(style or name, name, style or None, root or (data_root if name == dataset else None)))
    return out


def build_eval_set(s: EvalSet, split: str, dataset_args: dict[str, Any]):
    kwargs = dict(dataset_args)
    if s.style is not None:
        kwargs["style"] = s.style
    return build_dataset(s.dataset, root=s.root, split=split, **kwargs)


def load_context(src: str, model: PromptCLIP, what: str) -> Tensor:
    """The context tensor of a prompt checkpoint; it must fit ``model`` (same backbone and shape)."""
    other = load_pretrained(src)
    if not isinstance(other, PromptCLIP):
        raise CheckpointError(f"{what} {src} is not a prompt checkpoint (coop_*/fga_*).")
    if isinstance(other, CoCoOpCLIP):
        raise CheckpointError(f"{what} {src} is a CoCoOp checkpoint (context + Meta-Net); its context alone is not "
                              "a CoOp prompt. Pass it as --cocoop-pretrained and add --method cocoop.")
    check_same_prompt_shape(src, other, model, what)
    return other.ctx.detach().to(model.ctx.device)


def check_same_prompt_shape(src: str, other: PromptCLIP, model: PromptCLIP, what: str) -> None:
    """Raise CheckpointError unless ``other`` (from ``src``) has ``model``'s backbone and context shape."""
    mine, theirs = model.backbone_info["name"], other.backbone_info["name"]
    if mine != theirs:
        raise CheckpointError(f"{what} {src} was trained on {theirs}, the model under test is {mine}.")
    if other.ctx.shape != model.ctx.shape:
        raise CheckpointError(f"{what} {src} has a context of size {tuple(other.ctx.shape)} (n_ctx="
                              f"{other.n_ctx}), the model under test {tuple(model.ctx.shape)} (n_ctx={model.n_ctx}); "
                              "train both with the same --n-ctx.")


def load_cocoop(src: str, model: PromptCLIP, what: str = "--cocoop-pretrained") -> ConditionalPrompt:
    """The context and Meta-Net of a CoCoOp checkpoint, to run on ``model``'s frozen CLIP (same backbone,
    context shape and image-feature width); the checkpoint's own CLIP copy is dropped."""
    other = load_pretrained(src)
    if not isinstance(other, CoCoOpCLIP):
        kind = getattr(getattr(other, "config", None), "method", type(other).__name__)
        raise CheckpointError(f"{what} {src} is not a CoCoOp checkpoint (cocoop_*); it holds a {kind} model.")
    check_same_prompt_shape(src, other, model, what)
    net_in = other.meta_net[0].in_features
    if net_in != image_feature_dim(model.clip):
        raise CheckpointError(f"{what} {src}: its Meta-Net takes {net_in}-d image features, the model under test "
                              f"gives {image_feature_dim(model.clip)}-d ones.")
    prompt = other.conditional_prompt()
    device = model.ctx.device
    return ConditionalPrompt(prompt.ctx.to(device), prompt.meta_net.to(device))


def zero_shot_context(model: PromptCLIP, phrase: str) -> Tensor | None:
    """The init phrase as a context (None when its token count differs from the model's n_ctx)."""
    try:
        return model.phrase_context(phrase or DEFAULT_CTX_INIT).to(model.ctx.device)
    except VisionZooError:
        return None


def head_settings(cfg) -> HeadSettings:
    return HeadSettings(**{k: getattr(cfg, k) for k in asdict(HeadSettings())})


def run_fga_eval(task, args: argparse.Namespace, info, log) -> dict[str, Any]:
    """Evaluate every requested method on every set (see module docstring)."""
    from .task import build_prompt_model
    try:
        return _run(task, args, info, log, build_prompt_model)
    finally:
        cleanup_distributed()


@dataclass
class ViewSettings:
    """How test-time views are made and batched."""

    views: int = 64
    augmix: bool = False
    view_seed: int = 0
    image_batch: int = 8
    images_per_set: int | None = None


def compare_methods(model: PromptCLIP, prompts: dict[str, Tensor | None], methods: Sequence[str],
                    sets: Sequence[tuple[str, Any]], heads: HeadSettings, vs: ViewSettings,
                    device: torch.device, figures: int = 0, figure_dir: Path | None = None, info=None,
                    log=None, sweep: Sequence[str] = ()) -> dict[str, Any]:
    """Run ``methods`` (see :data:`~.harness.METHODS`) on ``sets`` (``(name, dataset)``, the first
    in-distribution) with shared views and image features. Returns accuracy rows, cost rows,
    image counts and the paths of the view figures (FGA's, else STSS's or Zero's, on the first OOD set).
    ``sweep`` adds STSS variants (see :func:`~.harness.sweep_predictors`) evaluated on the same features.
    """
    methods = resolve_methods(methods, prompts)
    predictors = build_predictors(methods, prompts, heads) + sweep_predictors(sweep, methods, prompts, heads)
    pc = model.pretrained_cfg
    size = int(pc["input_size"][-1])
    views = TTAViews(vs.views, size, augmix=vs.augmix, mean=pc["mean"], std=pc["std"], seed=vs.view_seed)
    say = log.info if log is not None else (lambda msg: None)
    say(f"FGA harness: {', '.join(methods)} on {', '.join(n for n, _ in sets)}; {vs.views} views of {size} px; "
        f"device {device}")
    rank, world = (info.rank, info.world_size) if info is not None else (0, 1)
    is_main = rank == 0
    shared = {k: Meter(device) for k in ("views", "encode0", "encode_rest")}
    figure_set = sets[1][0] if len(sets) > 1 else sets[0][0]
    figure_method = next((m for m in ("fga", "stss", "stss+coop", "zero", "zero+coop") if m in methods), None)
    paths: list[str] = []
    results = []
    for name, ds in sets:
        model.class_names = list(ds.classes)

        def on_batch(items, v, feats, preds, name=name, ds=ds):
            if not (figures and figure_dir is not None and is_main and figure_method and name == figure_set):
                return
            p = preds[figure_method]
            for b in range(len(items)):
                if len(paths) >= figures:
                    return
                label, guess = ds.classes[int(items[b][1])], ds.classes[int(p.pred[b])]
                path = Path(figure_dir) / f"{figure_method}_{name}_{len(paths):02d}.png"
                title = f"{figure_method} on {name}: true '{label}', predicted '{guess}'"
                sharp = figure_method == "fga" or figure_method.startswith("stss")
                save_views_figure(path, v[b], p.kept[b], p.scores[b] if p.scores is not None else None, title,
                                  pc["mean"], pc["std"], score_name="sharpness score" if sharp else "entropy")
                paths.append(str(path))

        res = evaluate_set(model, predictors, ds, name, views, device, vs.image_batch, vs.images_per_set, shared,
                           on_batch, log.progress if log is not None else None, rank, world)
        if info is not None:
            sums = all_reduce_sums({"images": res.images, **{f"c/{k}": v for k, v in res.correct.items()}}, info)
            res.images = int(sums["images"])
            res.correct = {k[2:]: int(v) for k, v in sums.items() if k.startswith("c/")}
        results.append(res)
        say(f"{name}: {res.images} images; " + " ".join(f"{p.name}={res.accuracy(p.name):.2f}" for p in predictors))
    return {"methods": methods, "accuracy": accuracy_rows(predictors, results),
            "costs": cost_rows(predictors, results, shared), "images": {r.name: r.images for r in results},
            "figures": paths, "settings": asdict(heads), "views": asdict(vs)}


def _run(task, args, info, log, build_prompt_model) -> dict[str, Any]:
    cfg = task.config_from_args(args)
    device = info.device
    out = Path(args.output_dir)
    sets = parse_eval_sets(cfg.eval_sets, args.dataset, args.data_root)
    datasets = [build_eval_set(s, cfg.test_split, args.dataset_args or {}) for s in sets]
    model = build_prompt_model(args, cfg, list(datasets[0].classes)).to(device).eval()
    own_cocoop = isinstance(model, CoCoOpCLIP)  # --model cocoop_* --pretrained: the model's own CoCoOp prompt
    prompts = {"zeroshot": zero_shot_context(model, cfg.ctx_init),
               "sapt": model.ctx.detach() if args.pretrained and not own_cocoop else None,
               "coop": load_context(cfg.coop_pretrained, model, "--coop-pretrained") if cfg.coop_pretrained else None,
               "cocoop": (load_cocoop(cfg.cocoop_pretrained, model) if cfg.cocoop_pretrained else
                          model.conditional_prompt() if own_cocoop and args.pretrained else None)}
    vs = ViewSettings(cfg.views, cfg.augmix, cfg.view_seed, cfg.image_batch, cfg.images_per_set or None)
    heads = head_settings(cfg)
    record = compare_methods(model, prompts, cfg.method, [(s.name, d) for s, d in zip(sets, datasets, strict=True)],
                             heads, vs, device, cfg.figures, out / "figures", info, log, cfg.stss_sweep or ())
    notes = [f"model {args.model}, weights {args.pretrained or cfg.clip_weights}; CoOp prompt "
             f"{cfg.coop_pretrained}; CoCoOp prompt {cfg.cocoop_pretrained}; split {cfg.test_split}; "
             f"{cfg.views} views (seed {cfg.view_seed}"
             f"{', AugMix' if cfg.augmix else ''}); device {device}",
             f"STSS: R={cfg.stss_r}, s={cfg.stss_keep}, rho'={cfg.stss_rho}, lambda={cfg.stss_lambda}; TPT: lr "
             f"{cfg.tpt_lr}, {cfg.tpt_steps} step(s), {cfg.tpt_keep:.0%} of views; Zero: {cfg.zero_keep:.0%} of views",
             "peak memory: " + ("CUDA allocator peak" if device.type == "cuda" else
                                "peak resident set of the process (all methods share one process and model)")]
    record = {"task": "fga", "model": args.model, "pretrained": str(args.pretrained),
              "coop_pretrained": cfg.coop_pretrained, "cocoop_pretrained": cfg.cocoop_pretrained,
              "sets": [asdict(s) for s in sets],
              "world_size": info.world_size, **record}
    if info.is_main:
        log.write_json("results.json", record)
        (out / "results.md").write_text(results_markdown(f"FGA and baselines: {args.model}", record["accuracy"],
                                                         record["costs"], notes))
        log.info(f"results: {out / 'results.json'} and {out / 'results.md'}")
    return record
