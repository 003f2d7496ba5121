"""Model cards: ``models/*.yaml``, one per published instance (architecture + weights).

A card names an architecture, where its weights come from (``hf-hub:`` id, https URL with sha256,
or a file shipped beside the card), the preprocessing it expects, what it was trained on and the
metrics measured for it (each with the command that measured it).
"""

from __future__ import annotations

import fnmatch
import functools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .errors import VisionZooError, unknown_name


def cards_dir() -> Path:
    """Folder of model cards: ``VISIONZOO_MODELS`` or the repository's ``models/``."""
    env = os.environ.get("VISIONZOO_MODELS")
    return Path(env) if env else Path(__file__).resolve().parent.parent / "models"


@dataclass
class ModelCard:
    """One published instance. ``name`` is ``<architecture>.<tag>``."""

    name: str
    architecture: str
    weights: dict[str, Any]
    default: bool = False
    model_args: dict[str, Any] = field(default_factory=dict)
    preprocessing: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None

    @property
    def tag(self) -> str:
        return self.name.split(".", 1)[1] if "." in self.name else ""

    def weight_source(self) -> tuple[str, str | None, str | None]:
        """(source spec, filename, sha256); shipped files are resolved relative to the card."""
        src = str(self.weights["source"])
        if not src.startswith(("hf-hub:", "http://", "https://")) and self.path is not None:
            src = str((self.path.parent / src).resolve())
        return src, self.weights.get("file"), self.weights.get("sha256")


_KNOWN = {"name", "architecture", "weights", "default", "model_args", "preprocessing"}


def _parse(path: Path) -> ModelCard:
    with open(path) as f:
        data = yaml.safe_load(f) or {}
    missing = [k for k in ("name", "architecture", "weights") if k not in data]
    if missing:
        raise VisionZooError(f"model card {path} lacks {missing}; see models/README.md for the schema.")
    src = str(data["weights"].get("source", ""))
    if src.startswith(("http://", "https://")) and not data["weights"].get("sha256"):
        raise VisionZooError(f"model card {path}: a URL weight source needs a sha256 (weights.sha256).")
    sha = data["weights"].get("sha256")
    if sha is not None and not (isinstance(sha, str) and len(sha) == 64
                                and all(c in "0123456789abcdef" for c in sha)):
        raise VisionZooError(f"model card {path}: weights.sha256 must be 64 lowercase hex digits, got {sha!r} "
                             "(quote it in the YAML if it consists of digits only).")
    return ModelCard(
        name=data["name"], architecture=data["architecture"], weights=dict(data["weights"]),
        default=bool(data.get("default", False)), model_args=dict(data.get("model_args") or {}),
        preprocessing=dict(data.get("preprocessing") or {}),
        extra={k: v for k, v in data.items() if k not in _KNOWN}, path=path)


@functools.lru_cache(maxsize=4)
def _load_all(folder: str) -> dict[str, ModelCard]:
    cards: dict[str, ModelCard] = {}
    for p in sorted(Path(folder).glob("*.yaml")):
        card = _parse(p)
        if card.name in cards:
            raise VisionZooError(f"model card name {card.name!r} appears in {cards[card.name].path} and {p}.")
        cards[card.name] = card
    return cards


def reload_cards() -> None:
    """Forget parsed cards (after adding or editing a YAML file at run time)."""
    _load_all.cache_clear()


def all_cards() -> dict[str, ModelCard]:
    """Every card in :func:`cards_dir`, by name."""
    return _load_all(str(cards_dir()))


def list_pretrained(pattern: str = "*") -> list[str]:
    """Names (``arch.tag``) of the published instances matching ``pattern``."""
    return sorted(n for n in all_cards() if fnmatch.fnmatch(n, pattern))


def find_card(name: str) -> ModelCard | None:
    """The card called ``name`` (``arch.tag``), or the default card of architecture ``name``."""
    cards = all_cards()
    if name in cards:
        return cards[name]
    for_arch = [c for c in cards.values() if c.architecture == name]
    defaults = [c for c in for_arch if c.default]
    if defaults:
        return defaults[0]
    return for_arch[0] if len(for_arch) == 1 else None


def get_card(name: str) -> ModelCard:
    """Like :func:`find_card` but raises with close matches when there is none."""
    card = find_card(name)
    if card is None:
        raise unknown_name("pretrained model", name, all_cards(),
                           hint="pretrained=True needs a model card (visionzoo.list_pretrained()); "
                                "otherwise pass a path, 'hf-hub:org/repo' or a URL.")
    return card
