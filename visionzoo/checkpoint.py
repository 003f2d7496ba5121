"""Checkpoints: ``save_pretrained``/``from_pretrained`` (PEFT style) and the training state.

A checkpoint folder holds

* ``config.json``: architecture, the keyword arguments that rebuild the base model (including the
  backbone id and its weight source), the method config, class names, the preprocessing the model
  was trained with, the visionzoo version, which tensors the weights file holds, and its sha256;
* ``model.safetensors``: only the trained tensors when the base weights come from a pretrained
  source (``weights: "trained"``), else the whole state dict (``weights: "full"``).

Everything is validated before anything is copied into the model, so a corrupt or mismatched
checkpoint raises :class:`~visionzoo.errors.CheckpointError` and leaves the model untouched.
The training state for ``--resume`` (model, optimizer, scheduler, RNG states, step, epoch) is a
separate ``torch.save`` file, written atomically and read with ``weights_only=True``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn

from .errors import CheckpointError, HubError
from .hub import parse_source, resolve_file, sha256_file
from .version import __version__

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
FORMAT_VERSION = 1


# ----------------------------------------------------------------------------- what to save
def trained_keys(model: nn.Module) -> list[str]:
    """State-dict keys that training can change: trainable parameters and persistent buffers.

    Buffers are included because frozen modules can still update them (batch-norm statistics)
    and they are small; a model may add keys with ``extra_trained_keys() -> list[str]``.
    """
    params = dict(model.named_parameters())
    keys = [k for k in model.state_dict() if k not in params or params[k].requires_grad]
    extra = getattr(model, "extra_trained_keys", None)
    if callable(extra):
        keys += [k for k in extra() if k not in keys]
    return keys


def saves_trained_only(model: nn.Module) -> bool:
    """True when the base weights can be rebuilt from a pretrained source (PEFT-style saving)."""
    return bool(getattr(model, "visionzoo_cfg", {}).get("base_weights"))


def state_to_save(model: nn.Module, weights: str = "auto") -> tuple[dict[str, torch.Tensor], str]:
    """The tensors to write and the mode (``"trained"`` or ``"full"``)."""
    if weights not in ("auto", "trained", "full"):
        raise ValueError(f"weights must be 'auto', 'trained' or 'full', not {weights!r}")
    mode = ("trained" if saves_trained_only(model) else "full") if weights == "auto" else weights
    state = model.state_dict()
    if mode == "trained":
        keys = trained_keys(model)
        state = {k: state[k] for k in keys if k in state}
    # safetensors refuses shared storage; clone to contiguous, independent tensors.
    return {k: v.detach().cpu().contiguous().clone() for k, v in state.items()}, mode


# ----------------------------------------------------------------------------- atomic writes
def atomic_torch_save(obj: Any, path: str | os.PathLike) -> None:
    """``torch.save`` to a temp file in the same folder, fsync, then rename over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _replace_dir(tmp_dir: Path, target: Path) -> None:
    """Move a finished folder into place; the old one is removed only after the swap."""
    old = None
    if target.exists():
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        os.replace(target, old)
    os.replace(tmp_dir, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _jsonable(obj: Any) -> Any:
    if is_dataclass(obj) and not isinstance(obj, type):
        return _jsonable(asdict(obj))
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    raise TypeError(f"cannot store {type(obj).__name__} in config.json: {obj!r}")


# ----------------------------------------------------------------------------- save / load
def build_config(model: nn.Module, mode: str) -> dict[str, Any]:
    """The ``config.json`` contents for ``model``."""
    cfg = getattr(model, "visionzoo_cfg", None)
    if not cfg or "architecture" not in cfg:
        raise CheckpointError("this model was not built by visionzoo.create_model, so its config is unknown; "
                              "build it with create_model(name, ...) to be able to save_pretrained it.")
    method_cfg = getattr(model, "config", None)
    return _jsonable({
        "format_version": FORMAT_VERSION,
        "visionzoo_version": __version__,
        "architecture": cfg["architecture"],
        "model_args": cfg.get("model_args", {}),
        "base_weights": cfg.get("base_weights"),
        "backbone": cfg.get("backbone"),
        "method_config": method_cfg if is_dataclass(method_cfg) else None,
        "class_names": getattr(model, "class_names", None),
        "preprocessing": getattr(model, "pretrained_cfg", None) or cfg.get("preprocessing"),
        "weights": mode,
    })


def save_pretrained(model: nn.Module, directory: str | os.PathLike, weights: str = "auto",
                    extra: dict[str, Any] | None = None) -> Path:
    """Write ``config.json`` + ``model.safetensors`` into ``directory`` (atomically, as a whole)."""
    model = getattr(model, "module", model)  # unwrap DDP
    state, mode = state_to_save(model, weights)
    config = build_config(model, mode)
    if extra:
        config["extra"] = _jsonable(extra)
    target = Path(directory)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp_dir = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.tmp-"))
    try:
        save_file(state, str(tmp_dir / WEIGHTS_NAME), metadata={"format": "pt", "visionzoo_weights": mode})
        config["weights_sha256"] = sha256_file(tmp_dir / WEIGHTS_NAME)
        config["num_tensors"] = len(state)
        with open(tmp_dir / CONFIG_NAME, "w") as f:
            json.dump(config, f, indent=2, sort_keys=True)
            f.write("\n")
        _replace_dir(tmp_dir, target)
    finally:
        if tmp_dir.exists():
            shutil.rmtree(tmp_dir, ignore_errors=True)
    return target


def read_config(src: str | os.PathLike) -> dict[str, Any]:
    """Read ``config.json`` of a checkpoint folder, hub repo or URL base (downloads only the config)."""
    path = _resolve_ckpt_file(src, CONFIG_NAME)
    try:
        with open(path) as f:
            config = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{path} is not valid JSON ({e}); the checkpoint is corrupt.") from e
    for key in ("architecture", "weights"):
        if key not in config:
            raise CheckpointError(f"{path} is not a visionzoo config (no {key!r}).")
    return config


def _resolve_ckpt_file(src: str | os.PathLike, filename: str, sha256: str | None = None) -> Path:
    s = parse_source(src)
    if s.kind == "url":  # a URL names the folder; its files sit beside each other
        return resolve_file(s.location.rstrip("/") + "/" + filename, sha256=sha256)
    if s.kind == "local" and not Path(s.location).is_dir():
        raise CheckpointError(f"{s.location} is not a checkpoint folder (expected a folder with "
                              f"{CONFIG_NAME} and {WEIGHTS_NAME}).")
    try:
        return resolve_file(src, filename)
    except HubError as e:
        if s.kind == "local":
            raise CheckpointError(f"{s.location} lacks {filename}; a checkpoint folder holds "
                                  f"{CONFIG_NAME} and {WEIGHTS_NAME} (written by save_pretrained).") from e
        raise


def load_safetensors(path: str | os.PathLike, expected_sha256: str | None = None) -> dict[str, torch.Tensor]:
    """Read a safetensors file; corrupt/truncated/modified files raise CheckpointError."""
    if expected_sha256:
        actual = sha256_file(path)
        if actual != expected_sha256:
            raise CheckpointError(f"{path} does not match the sha256 in its config.json (expected "
                                  f"{expected_sha256}, got {actual}): the file is corrupt or was replaced.")
    try:
        return load_file(str(path))
    except (SafetensorError, OSError, ValueError) as e:
        raise CheckpointError(f"{path} is not a readable safetensors file ({e}); the checkpoint is corrupt "
                              "or truncated. Re-download or re-save it.") from e


def validate_state(model: nn.Module, state: dict[str, torch.Tensor], mode: str, where: str = "") -> None:
    """Raise CheckpointError unless ``state`` fits ``model`` exactly (keys and shapes)."""
    own = model.state_dict()
    unexpected = sorted(k for k in state if k not in own)
    wrong = sorted(f"{k}: checkpoint {tuple(state[k].shape)} vs model {tuple(own[k].shape)}"
                   for k in state if k in own and state[k].shape != own[k].shape)
    required = trained_keys(model) if mode == "trained" else list(own)
    missing = sorted(k for k in required if k not in state)
    problems = []
    if unexpected:
        problems.append(f"{len(unexpected)} unexpected tensors (e.g. {unexpected[:3]})")
    if missing:
        problems.append(f"{len(missing)} missing tensors (e.g. {missing[:3]})")
    if wrong:
        problems.append(f"{len(wrong)} shape mismatches (e.g. {wrong[:3]})")
    if problems:
        raise CheckpointError(f"checkpoint {where} does not match the model: " + "; ".join(problems)
                              + ". Was it saved from a different architecture or configuration "
                              "(number of classes, prompt length, backbone)? Nothing was loaded.")


def load_state_into(model: nn.Module, state: dict[str, torch.Tensor], mode: str, where: str = "") -> None:
    """Validate, then copy ``state`` into ``model`` (all or nothing)."""
    validate_state(model, state, mode, where)
    model.load_state_dict(state, strict=(mode == "full"))


def from_pretrained(src: str | os.PathLike, *, pinned_sha256: str | None = None, **overrides: Any) -> nn.Module:
    """Rebuild base model + trained tensors from a folder, ``hf-hub:org/repo[@rev]`` or URL base.

    ``overrides`` replace entries of the saved ``model_args`` (e.g. ``device``-free options);
    changing shapes makes loading fail with a clear error. ``pinned_sha256`` (a model card's
    ``weights.sha256``) must match the folder's model.safetensors; it guards against a folder whose
    weights *and* config.json were both replaced.
    """
    from .factory import create_model

    config = read_config(src)
    weights_path = _resolve_ckpt_file(src, WEIGHTS_NAME, sha256=None)
    if pinned_sha256 and sha256_file(weights_path) != pinned_sha256:
        raise CheckpointError(f"{weights_path} does not match the sha256 pinned by its model card "
                              f"({pinned_sha256}); the shipped or downloaded checkpoint was replaced. "
                              "Re-download it, or update the card if you re-trained it on purpose.")
    state = load_safetensors(weights_path, config.get("weights_sha256"))
    args = {**config.get("model_args", {}), **overrides}
    model = create_model(config["architecture"], pretrained=False, **args)
    load_state_into(model, state, config["weights"], where=str(src))
    if config.get("preprocessing"):
        model.pretrained_cfg = dict(config["preprocessing"])
    if config.get("class_names") is not None:
        model.class_names = list(config["class_names"])
    model.visionzoo_cfg["checkpoint"] = str(src)
    return model
