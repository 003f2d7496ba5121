"""Weight sources against a real HTTP server on 127.0.0.1 (never the internet)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

import visionzoo
from visionzoo.errors import HubError, IntegrityError, OfflineError
from visionzoo.hub import download_url, parse_source, resolve_file, url_cache_path

from .conftest import TINY_VIT
from .loopback import LoopbackServer

PAYLOAD = b"visionzoo weights " * 1000
SHA = hashlib.sha256(PAYLOAD).hexdigest()


def test_parse_source_kinds():
    assert parse_source("hf-hub:org/repo@v1").revision == "v1"
    assert parse_source("hf-hub:org/repo").kind == "hf-hub"
    assert parse_source("https://x.org/a.safetensors").kind == "url"
    assert parse_source("./w.safetensors").kind == "local"
    with pytest.raises(HubError, match="expected 'hf-hub:org/repo'"):
        parse_source("hf-hub:justone")


def test_url_download_then_cached_after_server_stops():
    with LoopbackServer() as srv:
        srv.files["/w/model.bin"] = PAYLOAD
        url = srv.url + "/w/model.bin"
        path = download_url(url, sha256=SHA)
        assert path.read_bytes() == PAYLOAD
        assert path == url_cache_path(url)
        assert len(srv.requests) == 1
    # the server is gone: the cached copy is used without any request
    again = download_url(url, sha256=SHA)
    assert again == path and again.read_bytes() == PAYLOAD


def test_sha256_mismatch_is_refused_and_not_cached():
    with LoopbackServer() as srv:
        srv.files["/w/model.bin"] = PAYLOAD
        url = srv.url + "/w/model.bin"
        with pytest.raises(IntegrityError, match="sha256 mismatch"):
            download_url(url, sha256="0" * 64)
    assert not url_cache_path(url).exists()
    assert not [p for p in url_cache_path(url).parent.glob("*")]  # no partial file left behind


def test_truncated_download_is_refused():
    with LoopbackServer() as srv:
        srv.files["/w/model.bin"] = PAYLOAD
        srv.truncate.add("/w/model.bin")
        url = srv.url + "/w/model.bin"
        with pytest.raises(IntegrityError, match="truncated"):
            download_url(url)
    assert not url_cache_path(url).exists()


def test_offline_and_uncached_gives_clear_error(monkeypatch):
    monkeypatch.setenv("VISIONZOO_OFFLINE", "1")
    with pytest.raises(OfflineError) as e:
        download_url("https://example.invalid/weights.safetensors", sha256=SHA)
    msg = str(e.value)
    assert "offline mode is on" in msg and "weights.safetensors" in msg and "pretrained=/path" in msg


def test_unreachable_and_uncached_gives_clear_error():
    with LoopbackServer() as srv:
        url = srv.url + "/w/model.bin"
    with pytest.raises(OfflineError, match="could not be reached"):  # server already stopped
        download_url(url)


def test_hf_hub_download_cache_and_offline(monkeypatch):
    with LoopbackServer() as srv:
        monkeypatch.setenv("HF_ENDPOINT", srv.url)
        srv.add_hub_file("org/repo", "weights.bin", PAYLOAD)
        path = resolve_file("hf-hub:org/repo", "weights.bin", sha256=SHA)
        assert Path(path).read_bytes() == PAYLOAD
        assert any("/org/repo/resolve/" in p for _, p in srv.requests)
    # server stopped: the cached file is reused, also in offline mode
    assert Path(resolve_file("hf-hub:org/repo", "weights.bin")).read_bytes() == PAYLOAD
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert Path(resolve_file("hf-hub:org/repo", "weights.bin")).read_bytes() == PAYLOAD
    with pytest.raises(OfflineError, match="other.bin of hf-hub:org/repo.*offline mode is on"):
        resolve_file("hf-hub:org/repo", "other.bin")


def test_hf_hub_missing_file_is_not_an_offline_error(monkeypatch):
    with LoopbackServer() as srv:
        monkeypatch.setenv("HF_ENDPOINT", srv.url)
        srv.add_hub_file("org/repo", "weights.bin", PAYLOAD)
        with pytest.raises(HubError) as e:
            resolve_file("hf-hub:org/repo", "missing.bin")
        assert not isinstance(e.value, OfflineError)


def _saved_checkpoint(tmp_path: Path) -> tuple[Path, torch.nn.Module]:
    model = visionzoo.create_model("classifier_vit_tiny_patch16_224", num_classes=3, **TINY_VIT)
    return visionzoo.save_pretrained(model, tmp_path / "ckpt"), model.eval()


def test_from_pretrained_over_hf_hub_and_url(tmp_path, monkeypatch):
    folder, model = _saved_checkpoint(tmp_path)
    x = torch.randn(2, 3, 32, 32)
    with LoopbackServer() as srv:
        monkeypatch.setenv("HF_ENDPOINT", srv.url)
        for name in ("config.json", "model.safetensors"):
            srv.add_hub_file("me/tiny", name, (folder / name).read_bytes())
            srv.files[f"/ckpts/tiny/{name}"] = (folder / name).read_bytes()
        from_hub = visionzoo.load_pretrained("hf-hub:me/tiny").eval()
        from_url = visionzoo.load_pretrained(srv.url + "/ckpts/tiny/").eval()
        via_create = visionzoo.create_model("classifier_vit_tiny_patch16_224", pretrained="hf-hub:me/tiny").eval()
    with torch.no_grad():
        ref = model(x)
        for m in (from_hub, from_url, via_create):
            torch.testing.assert_close(m(x), ref, rtol=0, atol=0)
    # offline, the hub checkpoint still loads from the cache
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    visionzoo.load_pretrained("hf-hub:me/tiny")


def test_url_checkpoint_with_tampered_weights_is_refused(tmp_path):
    folder, _ = _saved_checkpoint(tmp_path)
    with LoopbackServer() as srv:
        srv.files["/c/config.json"] = (folder / "config.json").read_bytes()
        data = bytearray((folder / "model.safetensors").read_bytes())
        data[-1] ^= 0xFF
        srv.files["/c/model.safetensors"] = bytes(data)
        with pytest.raises(visionzoo.errors.CheckpointError, match="does not match the sha256"):
            visionzoo.load_pretrained(srv.url + "/c/")


def test_push_to_hub_uploads_the_folder(tmp_path, monkeypatch):
    folder, _ = _saved_checkpoint(tmp_path)
    calls = {}

    class FakeApi:
        def __init__(self, endpoint=None, token=None):
            calls["endpoint"] = endpoint

        def create_repo(self, repo_id, private, exist_ok):
            calls["repo"] = (repo_id, private, exist_ok)

        def upload_folder(self, repo_id, folder_path, revision, commit_message):
            calls["files"] = sorted(p.name for p in Path(folder_path).iterdir())
            return type("Info", (), {"commit_url": f"{repo_id}@abc"})()

    import huggingface_hub
    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    assert visionzoo.push_to_hub(folder, "me/tiny") == "me/tiny@abc"
    assert calls["files"] == ["config.json", "model.safetensors"] and calls["repo"][0] == "me/tiny"
    with pytest.raises(HubError, match="not a visionzoo checkpoint folder"):
        visionzoo.push_to_hub(tmp_path, "me/tiny")
