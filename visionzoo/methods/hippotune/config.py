"""Configuration dataclasses: the HippoTune/L2P architectures and the flags of the CL tasks.

Model dataclasses are stored as ``method_config`` in a checkpoint's config.json. Task dataclasses
become the flags of ``train.py <task>`` (one ``--flag`` per field). Defaults and the measurements
behind them: docs/hippotune.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class HippoTuneModelConfig:
    """Architecture of ``hippotune_<vit>`` (keyword arguments of the family, with these defaults)."""

    adapt_blocks: list[int] = field(default_factory=list)  # resolved indices (default: first 7/12 of depth)
    memory_size: int = 32       # M, slots per adapted layer
    value_dim: int = 0          # d_v (0 = the block width d; then v^t is fused as a token directly)
    t_max: int = 4              # most loop steps (paper: 4 best)
    temperature: float = 0.1    # softmax temperature of the cosine similarities (paper: 0.1 best)
    top_k: int = 4              # k best slots per step (0 = dense retrieval); val-split choice
    alpha: float = 0.5          # q^{t+1} = α q^t + (1 − α) P(v^t)
    eps: float = 1e-3           # relative early-stop threshold on ‖v^t − v^{t−1}‖
    grad_steps: int = 2         # truncated backprop: loop transitions with a graph
    query: str = "cls"          # "cls" or "mean" (pooled patch tokens) of norm1(h^{l−1})
    spectral_norm: bool = False  # spectral normalisation of P
    value_init_std: float = 1.0  # initial values ~ N(0, std²) (0: a shared null token at first)
    head: str = "cosine"        # classifier: "cosine" (s · cos) or "linear"
    head_scale: float = 16.0    # s of the cosine head
    memory_partitions: int = 0  # per-task memory partitions (0 = one memory shared by all tasks)


@dataclass
class L2PModelConfig:
    """Architecture of ``l2p_<vit>`` (Learning to Prompt, Wang et al. CVPR 2022; l2p-pytorch defaults)."""

    pool_size: int = 10         # prompts in the pool
    prompt_length: int = 5      # tokens per prompt
    top_k: int = 5              # prompts selected per image (prepended: top_k * prompt_length tokens)
    batchwise_prompt: bool = True  # in training, the batch's most frequent top_k prompts for every image
    head: str = "cosine"        # classifier on the mean prompt output (same choice as HippoTune's)
    head_scale: float = 16.0


@dataclass
class CodaPromptModelConfig:
    """Architecture of ``coda_<vit>`` (CODA-Prompt, Smith et al. CVPR 2023; the authors' defaults)."""

    prompt_layers: list[int] = field(default_factory=list)  # resolved indices (default: first 5/12 of depth)
    pool_size: int = 100        # M, prompt components per layer, split evenly over the tasks
    prompt_length: int = 8      # tokens per component: the first half are key prefixes, the second value prefixes
    num_tasks: int = 10         # tasks of the run (component partitions: pool_size // num_tasks each)
    head: str = "cosine"        # classifier on the class-token output (same choice as HippoTune's and L2P's)
    head_scale: float = 16.0


@dataclass
class ContinualConfig:
    """Class-incremental protocol flags shared by hippotune, l2p, seqhead, simplecil and joint."""

    tasks: int = field(default=10, metadata={"help": "number of class-incremental tasks"})
    init_classes: int = field(default=0, metadata={
        "help": "classes of the first task (0: all tasks get num_classes / tasks)"})
    class_order_seed: int = field(default=1993, metadata={"help": "seed of the shuffled class order"})
    class_order: list[int] | None = field(default=None, metadata={
        "help": "explicit class order (original class ids, a permutation of 0..C-1); overrides the seed"})
    eval_split: str = field(default="test", metadata={
        "help": "split the accuracy matrix is measured on (use val to choose hyperparameters)"})
    train_per_class: int = field(default=0, metadata={
        "help": "training images per class (PartWorld: images_per_class; other datasets: a seeded subset; "
                "0 = all)"})
    test_per_class: int = field(default=0, metadata={
        "help": "evaluation images per class (as --train-per-class)"})
    mask_logits: bool = field(default=True, metadata={
        "help": "in training, mask the logits of classes outside the current task (else only unseen ones)"})
    eval_each_epoch: bool = field(default=False, metadata={
        "help": "evaluate on the seen classes after every epoch (default: after each task only)"})
    start_task: int = field(default=0, metadata={
        "help": "continue a run from --pretrained (a checkpoint after task start_task - 1)"})
    backbone_pretrained: str = field(default="true", metadata={
        "help": "backbone weights when building a fresh model: true (timm/zoo default), false (random), a "
                "file, hf-hub:org/repo or a URL; --model-args backbone_pretrained=... wins"})
    head_lr_scale: float = field(default=1.0, metadata={"help": "learning-rate multiplier of the classifier head"})
    adapter_lr_scale: float = field(default=1.0, metadata={
        "help": "learning-rate multiplier of everything else that trains (HippoTune's memories, L2P's prompts "
                "and keys)"})
    head_final: str = field(default="trained", metadata={
        "choices": ["trained", "prototype"],
        "help": "rows of a task's classes after its training: as trained, or re-anchored at their class means "
                "under the trained model (prototype)"})
    classifier: str | None = field(default=None, metadata={
        "choices": ["head", "lda"],
        "help": "prediction: the model's own classifier (head), or a streaming shared-covariance LDA over its "
                "features, updated after each task without keeping images (lda; default: the model's choice)"})
    head_init: str = field(default="prototype", metadata={
        "choices": ["prototype", "random"],
        "help": "rows of a new task's classes: their class means under the current model (prototype) or as built"})
