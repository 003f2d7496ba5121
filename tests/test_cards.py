"""Model cards: parsing, pretrained=True through a card, and the cards shipped in models/."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

import visionzoo
from visionzoo.cards import all_cards, cards_dir, reload_cards
from visionzoo.errors import CheckpointError, VisionZooError

from .conftest import TINY_VIT
from .loopback import LoopbackServer


def _write_weights(path):
    torch.manual_seed(1)
    model = visionzoo.create_model("classifier_vit_tiny_patch16_224", num_classes=3, **TINY_VIT)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path))
    return model.eval()


def test_card_with_shipped_file_and_url(tmp_path, monkeypatch):
    src = _write_weights(tmp_path / "tiny.safetensors")
    sha = hashlib.sha256((tmp_path / "tiny.safetensors").read_bytes()).hexdigest()
    args = {"num_classes": 3, **TINY_VIT}
    cards = tmp_path / "cards"
    cards.mkdir()
    (cards / "local.yaml").write_text(
        "name: classifier_vit_tiny_patch16_224.local\narchitecture: classifier_vit_tiny_patch16_224\n"
        f"default: true\nweights: {{source: ../tiny.safetensors, sha256: {sha}}}\nmodel_args: {args}\n"
        "preprocessing: {mean: [0.2, 0.2, 0.2]}\nmetrics: {acc1: 50.0}\n")
    monkeypatch.setenv("VISIONZOO_MODELS", str(cards))
    x = torch.randn(1, 3, 32, 32)
    for name in ("classifier_vit_tiny_patch16_224", "classifier_vit_tiny_patch16_224.local"):
        m = visionzoo.create_model(name, pretrained=True).eval()
        with torch.no_grad():
            torch.testing.assert_close(m(x), src(x), rtol=0, atol=0)
        assert m.pretrained_cfg["mean"] == [0.2, 0.2, 0.2]
    assert visionzoo.list_pretrained() == ["classifier_vit_tiny_patch16_224.local"]
    assert all_cards()["classifier_vit_tiny_patch16_224.local"].extra["metrics"] == {"acc1": 50.0}

    with LoopbackServer() as srv:
        (cards / "web.yaml").write_text(
            "name: classifier_vit_tiny_patch16_224.web\narchitecture: classifier_vit_tiny_patch16_224\n"
            f"weights: {{source: '{srv.url}/tiny.safetensors', sha256: {sha}}}\nmodel_args: {args}\n")
        reload_cards()
        srv.files["/tiny.safetensors"] = (tmp_path / "tiny.safetensors").read_bytes()
        m = visionzoo.create_model("classifier_vit_tiny_patch16_224.web", pretrained=True).eval()
    with torch.no_grad():
        torch.testing.assert_close(m(x), src(x), rtol=0, atol=0)


def test_card_with_malformed_sha256_is_rejected(tmp_path, monkeypatch):
    (tmp_path / "bad.yaml").write_text("name: a.b\narchitecture: a\nweights: {source: x.safetensors, sha256: 0123}\n")
    monkeypatch.setenv("VISIONZOO_MODELS", str(tmp_path))
    reload_cards()
    with pytest.raises(VisionZooError, match="64 lowercase hex"):
        all_cards()


def test_url_card_without_sha256_is_rejected(tmp_path, monkeypatch):
    (tmp_path / "bad.yaml").write_text("name: a.b\narchitecture: a\nweights: {source: 'https://x.org/w.bin'}\n")
    monkeypatch.setenv("VISIONZOO_MODELS", str(tmp_path))
    with pytest.raises(VisionZooError, match="needs a sha256"):
        visionzoo.list_pretrained()


def test_shipped_cards_are_consistent():
    """Every card in models/ names a registered architecture; shipped files match their sha256."""
    from visionzoo.hub import sha256_file
    for card in all_cards().values():
        assert visionzoo.is_model(card.architecture), card.name
        src, _, sha = card.weight_source()
        if not src.startswith(("hf-hub:", "http")):
            assert sha, f"{card.name}: a shipped file needs its sha256 in the card"
            if Path(src).is_dir():  # a checkpoint folder: the card pins its model.safetensors
                src = str(Path(src) / "model.safetensors")
            assert sha256_file(src) == sha, f"{card.name}: {src} does not match the card's sha256"
    assert cards_dir().name == "models"


def test_card_pointing_at_checkpoint_folder_pins_its_weights(tmp_path, monkeypatch):
    """A card may name a save_pretrained folder; its sha256 pins the folder's model.safetensors."""
    torch.manual_seed(2)
    model = visionzoo.create_model("classifier_vit_tiny_patch16_224", num_classes=3, **TINY_VIT).eval()
    visionzoo.save_pretrained(model, tmp_path / "ckpt")
    sha = hashlib.sha256((tmp_path / "ckpt" / "model.safetensors").read_bytes()).hexdigest()
    cards = tmp_path / "cards"
    cards.mkdir()
    card = ("name: classifier_vit_tiny_patch16_224.folder\narchitecture: classifier_vit_tiny_patch16_224\n"
            "weights: {{source: ../ckpt, sha256: {sha}}}\n")
    (cards / "folder.yaml").write_text(card.format(sha=sha))
    monkeypatch.setenv("VISIONZOO_MODELS", str(cards))
    reload_cards()
    x = torch.randn(1, 3, 32, 32)
    loaded = visionzoo.create_model("classifier_vit_tiny_patch16_224.folder", pretrained=True).eval()
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), model(x), rtol=0, atol=0)

    (cards / "folder.yaml").write_text(card.format(sha="f" * 64))
    reload_cards()
    with pytest.raises(CheckpointError, match="pinned by its model card"):
        visionzoo.create_model("classifier_vit_tiny_patch16_224.folder", pretrained=True)
