"""Shared fixtures: an isolated cache per test and a tiny timm ViT configuration."""

from __future__ import annotations

import pytest

TINY_VIT = dict(img_size=32, patch_size=8, depth=2, embed_dim=32, num_heads=2)
TINY_VIT_ARGS = ["img_size=32", "patch_size=8", "depth=2", "embed_dim=32", "num_heads=2"]


@pytest.fixture(autouse=True)
def _isolated_caches(tmp_path_factory, monkeypatch):
    """No test reads or writes the user's caches, and none can reach a real hub."""
    root = tmp_path_factory.mktemp("caches")
    monkeypatch.setenv("VISIONZOO_CACHE", str(root / "visionzoo"))
    monkeypatch.setenv("HF_HOME", str(root / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # discard port: nothing listens
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("VISIONZOO_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setenv("HF_HUB_ETAG_TIMEOUT", "2")
    yield


@pytest.fixture
def tiny_vit_kwargs():
    return dict(TINY_VIT)


@pytest.fixture(scope="module")
def one_torch_thread():
    """Small tensors: intra-op threads only add overhead (and spin on a shared 2-core machine).

    Use per module with ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``.
    """
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
