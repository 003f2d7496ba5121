"""``train.py`` / ``eval.py`` tasks of the class-incremental harness.

=============  =====================================  ==================================
task           model families (``--model``)           what it is
=============  =====================================  ==================================
hippotune      ``hippotune_<vit>``                    HippoTune (iterative retrieval)
l2p            ``l2p_<vit>``                          L2P prompt pool (query pass)
coda           ``coda_<vit>``                         CODA-Prompt (query pass, prefix prompts)
seqhead        ``seqhead_<vit>``                      sequential linear head (lower bound)
simplecil      ``simplecil_<vit>``                    class-mean prototypes, no training
joint          ``hippotune_`` / ``seqhead_`` / ``l2p_``  all classes at once (upper bound)
=============  =====================================  ==================================

A bare timm name (``--model vit_tiny_partworld``) takes the task's first family.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader

from ...checkpoint import save_pretrained
from ...engine.data import SeededItems
from ...engine.task import register_task
from ...errors import VisionZooError
from ...factory import create_transforms
from .config import ContinualConfig
from .learner import ContinualTask, evaluate_now

EPILOG = ("Class-incremental protocol: one engine fit per task under <output-dir>/task_NN, then the accuracy "
          "matrix, Acc / AAA / forgetting, accuracy_curve.png, accuracy_matrix.png, results.json and results.md "
          "in <output-dir>. Example: train.py {name} --model {family}_vit_tiny_partworld --dataset partworld "
          "--tasks 10 --train-per-class 20 --test-per-class 20 --epochs 3 --batch-size 32 --lr 0.01 "
          "--adapter-lr-scale 0.1 --weight-decay 0 (the recipe of docs/hippotune.md)")


@dataclass
class HippoTuneTaskConfig(ContinualConfig):
    adapt_blocks: list[int] | None = field(default=None, metadata={
        "help": "indices of the blocks to adapt (default: the first round(7/12 * depth), the paper's 1-7 of 12)"})
    memory_partitions: int | None = field(default=None, metadata={
        "help": "split each layer's memory into this many per-task partitions: task t trains partition t, "
                "earlier ones are frozen, from task P on the memory is frozen (0 = one memory shared by all tasks; "
                "default: the model's)"})
    lambda_orth: float = field(default=1e-3, metadata={"help": "weight of Σ_l ‖K̂K̂ᵀ − I‖²_F"})
    lambda_ent: float = field(default=1e-2, metadata={"help": "weight of the mean retrieval entropy"})
    head_final: str = field(default="prototype", metadata={
        "choices": ["trained", "prototype"],
        "help": "rows of a task's classes after its training: as trained, or re-anchored at their class means "
                "under the trained model (prototype)"})


@dataclass
class L2PTaskConfig(ContinualConfig):
    pull_coeff: float = field(default=0.1, metadata={
        "help": "weight of L2P's key–query pull loss (l2p-pytorch: 0.1)"})


@dataclass
class CodaTaskConfig(ContinualConfig):
    ortho_mu: float = field(default=0.0, metadata={
        "help": "weight of CODA-Prompt's orthogonality penalty on keys, attention vectors and components (the "
                "authors' final recipe: 0, orthogonal initialisation only)"})


@dataclass
class JointTaskConfig(HippoTuneTaskConfig):
    pull_coeff: float = field(default=0.1, metadata={"help": "L2P's pull-loss weight (l2p_* models)"})


class _Trained(ContinualTask):
    def aux_weights(self, cfg: Any) -> dict[str, float]:
        return {"orth": getattr(cfg, "lambda_orth", 0.0), "entropy": getattr(cfg, "lambda_ent", 0.0),
                "pull": getattr(cfg, "pull_coeff", 0.0), "ortho": getattr(cfg, "ortho_mu", 0.0)}

    def model_kwargs(self, cfg: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        blocks = getattr(cfg, "adapt_blocks", None)
        if blocks:
            out["adapt_blocks"] = list(blocks)
        if getattr(cfg, "memory_partitions", None) is not None:
            out["memory_partitions"] = cfg.memory_partitions
        return out


@register_task
class HippoTuneTask(_Trained):
    name = "hippotune"
    help = "HippoTune: class-incremental learning with iterative retrieval layers in a frozen ViT"
    Config = HippoTuneTaskConfig
    families = ("hippotune",)
    default_model = "hippotune_vit_tiny_partworld"
    epilog = EPILOG.format(name="hippotune", family="hippotune")


@register_task
class L2PTask(_Trained):
    name = "l2p"
    help = "L2P (prompt pool selected by a frozen query pass), class-incremental baseline"
    Config = L2PTaskConfig
    families = ("l2p",)
    default_model = "l2p_vit_tiny_partworld"
    epilog = EPILOG.format(name="l2p", family="l2p")


@register_task
class CodaTask(_Trained):
    name = "coda"
    help = "CODA-Prompt (attention-weighted prompt components, query pass), class-incremental baseline"
    Config = CodaTaskConfig
    families = ("coda",)
    default_model = "coda_vit_tiny_partworld"
    epilog = EPILOG.format(name="coda", family="coda")

    def model_kwargs(self, cfg: Any) -> dict[str, Any]:
        return {"num_tasks": cfg.tasks}

    def create(self, args: argparse.Namespace, cfg: Any):
        model = super().create(args, cfg)
        if model.config.num_tasks != self.protocol.num_tasks:
            raise VisionZooError(f"this coda model splits its prompt components over {model.config.num_tasks} "
                                 f"tasks, but the run has {self.protocol.num_tasks}; use --tasks "
                                 f"{model.config.num_tasks} (or build it with num_tasks={self.protocol.num_tasks}).")
        return model


@register_task
class SeqHeadTask(_Trained):
    name = "seqhead"
    help = "sequential linear head on a frozen ViT, class-incremental lower bound"
    Config = ContinualConfig
    families = ("seqhead",)
    default_model = "seqhead_vit_tiny_partworld"
    epilog = EPILOG.format(name="seqhead", family="seqhead")


@register_task
class JointTask(_Trained):
    name = "joint"
    help = "joint training on all classes at once (class-incremental upper bound)"
    Config = JointTaskConfig
    families = ("hippotune", "seqhead", "l2p")
    joint = True
    default_model = "hippotune_vit_tiny_partworld"
    epilog = EPILOG.format(name="joint", family="hippotune")


@register_task
class SimpleCILTask(ContinualTask):
    name = "simplecil"
    help = "SimpleCIL: class-mean prototypes of a frozen ViT with a cosine classifier (no training)"
    Config = ContinualConfig
    families = ("simplecil",)
    trains = False
    default_model = "simplecil_vit_tiny_partworld"
    epilog = ("Training-free: each task adds the class means of its training images (eval preprocessing). "
              "Example: train.py simplecil --model simplecil_vit_tiny_partworld --dataset partworld --tasks 10")

    def fit_training_free(self, args: argparse.Namespace, stage_dir: Path) -> dict[str, float]:
        model = self.model
        raw = self.protocol.train_set(self.stage)
        items = SeededItems(raw, create_transforms(model, training=False), args.seed)
        loader = DataLoader(items, batch_size=args.batch_size, shuffle=False, num_workers=args.workers)
        device = next(model.buffers()).device
        model.eval()
        with torch.inference_mode():
            for batch in loader:
                images, labels = batch[0].to(device), batch[1].to(device)
                feats = model.features(images)
                model.add_features(feats, labels)
                if model.lda is not None:
                    model.lda.update(feats, labels)
        metrics = evaluate_now(self, args, self.build(args, training=False).eval_set)
        save_pretrained(model, stage_dir / "final", extra={"classes_seen": int(model.num_seen), **metrics})
        return metrics
