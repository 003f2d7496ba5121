"""Exceptions with messages that say what was wrong and what to do."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class VisionZooError(Exception):
    """Base class of every error visionzoo raises on purpose."""


class UnknownNameError(VisionZooError, KeyError):
    """A model, dataset, operator or option name that is not registered."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class HubError(VisionZooError, OSError):
    """A weight source could not be resolved, downloaded or verified."""


class OfflineError(HubError):
    """Offline (or unreachable) and the requested file is not cached."""


class IntegrityError(HubError):
    """A downloaded or cached file does not match its expected size or sha256."""


class CheckpointError(VisionZooError, ValueError):
    """A checkpoint is corrupt, incomplete, or does not match the model."""


class DatasetLayoutError(VisionZooError, FileNotFoundError):
    """A dataset folder does not have the expected layout."""


class NonFiniteLossError(VisionZooError, FloatingPointError):
    """Training produced a NaN/Inf loss; the run stops, checkpoints are left untouched."""


def close_matches(name: str, candidates: Iterable[str], n: int = 5) -> list[str]:
    """The registered names that look most like ``name`` (for 'did you mean' hints)."""
    candidates = list(candidates)
    matches = difflib.get_close_matches(name, candidates, n=n, cutoff=0.5)
    if not matches:  # fall back to substring hits, e.g. "tiny" -> every *_tiny model
        matches = [c for c in candidates if name.lower() in c.lower()][:n]
    return matches


def unknown_name(kind: str, name: str, candidates: Iterable[str], hint: str = "") -> UnknownNameError:
    """Build an UnknownNameError that lists the closest registered names."""
    candidates = sorted(set(candidates))
    matches = close_matches(name, candidates)
    msg = f"unknown {kind} {name!r}."
    if matches:
        msg += " Did you mean: " + ", ".join(matches) + "?"
    elif candidates:
        shown = ", ".join(candidates[:12]) + (" ..." if len(candidates) > 12 else "")
        msg += f" Known {kind}s: {shown}."
    if hint:
        msg += " " + hint
    return UnknownNameError(msg)
