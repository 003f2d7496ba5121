"""Weight sources: local files, ``hf-hub:org/repo[@revision]`` ids and https URLs.

* ``hf-hub:`` ids go through :mod:`huggingface_hub` (honours ``HF_ENDPOINT``, ``HF_HUB_OFFLINE``,
  ``HF_HOME``/``HF_HUB_CACHE``, read at call time so tests and users can change them).
* Plain URLs are downloaded into the visionzoo cache (``VISIONZOO_CACHE``, default
  ``~/.cache/visionzoo``): streamed to a temporary file, checked against the announced size and
  the expected sha256, then renamed into place, so a cache entry is always complete.
* Offline (``VISIONZOO_OFFLINE=1`` or ``HF_HUB_OFFLINE=1``) or unreachable with nothing cached:
  one :class:`~visionzoo.errors.OfflineError` naming what was looked for, where, and how to supply it.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import shutil
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from .errors import HubError, IntegrityError, OfflineError

HF_PREFIX = "hf-hub:"
_CHUNK = 1 << 20


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


def is_offline() -> bool:
    """True when the user asked for no network access."""
    return _truthy(os.environ.get("VISIONZOO_OFFLINE")) or _truthy(os.environ.get("HF_HUB_OFFLINE"))


def cache_dir() -> Path:
    """The visionzoo download cache (``VISIONZOO_CACHE`` or ``~/.cache/visionzoo``)."""
    root = os.environ.get("VISIONZOO_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "visionzoo")
    return Path(root)


def hf_cache_dir() -> Path:
    """Where huggingface_hub keeps repos (``HF_HUB_CACHE`` or ``$HF_HOME/hub``)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
    return Path(home) / "hub"


def sha256_file(path: str | os.PathLike) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


@dataclass(frozen=True)
class Source:
    """A parsed weight source. ``kind`` is ``"local"``, ``"hf-hub"`` or ``"url"``."""

    kind: str
    location: str  # path, repo id, or URL
    revision: str | None = None

    def __str__(self) -> str:
        if self.kind == "hf-hub":
            return HF_PREFIX + self.location + (f"@{self.revision}" if self.revision else "")
        return self.location


def parse_source(spec: str | os.PathLike) -> Source:
    """Parse ``hf-hub:org/repo[@rev]``, ``https://...`` or a local path."""
    spec = os.fspath(spec)
    if spec.startswith(HF_PREFIX):
        repo = spec[len(HF_PREFIX):]
        repo, _, rev = repo.partition("@")
        if repo.count("/") != 1 or not all(repo.split("/")):
            raise HubError(f"bad hub id {spec!r}: expected 'hf-hub:org/repo' or 'hf-hub:org/repo@revision'.")
        return Source("hf-hub", repo, rev or None)
    if spec.startswith(("https://", "http://")):
        return Source("url", spec)
    return Source("local", os.path.expanduser(spec))


def resolve_file(spec: str | os.PathLike, filename: str | None = None, sha256: str | None = None) -> Path:
    """Return a local path for one file of a weight source, downloading it if needed.

    Args:
        spec: a local file or folder, ``hf-hub:org/repo[@rev]``, or an http(s) URL.
        filename: the file inside a folder or hub repo (ignored for URLs and local files).
        sha256: expected hex digest; a mismatch raises :class:`IntegrityError`.
    """
    src = parse_source(spec)
    if src.kind == "local":
        path = Path(src.location)
        if path.is_dir() and filename:
            path = path / filename
        if not path.exists():
            raise HubError(f"weights not found: {path} does not exist. Give an existing file or folder, "
                           "an 'hf-hub:org/repo' id, or an https URL.")
    elif src.kind == "hf-hub":
        if not filename:
            raise HubError(f"{src}: which file of the repo? (no filename given)")
        path = hf_download(src.location, filename, src.revision)
    else:
        return download_url(src.location, sha256=sha256)
    if sha256:
        _check_sha256(path, sha256, what=str(src))
    return path


def _check_sha256(path: Path, expected: str, what: str) -> None:
    actual = sha256_file(path)
    if actual.lower() != expected.lower():
        raise IntegrityError(f"sha256 mismatch for {what} ({path}): expected {expected}, got {actual}. "
                             "The file is corrupt or was replaced; delete it and download again, or fix "
                             "the sha256 in the model card.")


def hf_download(repo_id: str, filename: str, revision: str | None = None) -> Path:
    """Download (or reuse from cache) one file of a Hugging Face Hub repo."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import (
        EntryNotFoundError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    where = hf_cache_dir()
    try:
        return Path(hf_hub_download(
            repo_id, filename, revision=revision, cache_dir=where,
            endpoint=os.environ.get("HF_ENDPOINT") or None, local_files_only=is_offline()))
    except LocalEntryNotFoundError as e:
        raise OfflineError(_offline_message(f"{filename} of hf-hub:{repo_id}" + (f"@{revision}" if revision else ""),
                                            where, "HF_HUB_OFFLINE")) from e
    except (RepositoryNotFoundError, RevisionNotFoundError, EntryNotFoundError) as e:
        raise HubError(f"hf-hub:{repo_id}: {type(e).__name__}: {e}. Check the repo id, revision and file "
                       f"name ({filename!r}); private repos need `hf auth login` or HF_TOKEN.") from e
    except Exception as e:  # network failures of any HTTP client version end here
        raise OfflineError(_offline_message(f"{filename} of hf-hub:{repo_id}", where, "HF_HUB_OFFLINE")
                           + f" (cause: {type(e).__name__}: {e})") from e


def _offline_message(what: str, where: Path, env: str) -> str:
    state = "offline mode is on" if is_offline() else "the server could not be reached"
    return (f"cannot get {what}: {state} and it is not in the cache ({where}). "
            f"Connect once to download it (unset VISIONZOO_OFFLINE/{env}), copy the file into the cache, "
            "or pass a local file or folder instead (pretrained=/path/to/weights).")


def url_cache_path(url: str) -> Path:
    """Cache location of a URL: ``<cache>/url/<sha256(url)[:16]>/<basename>``."""
    key = hashlib.sha256(url.encode()).hexdigest()[:16]
    name = os.path.basename(url.split("?", 1)[0].split("#", 1)[0]) or "download"
    return cache_dir() / "url" / key / name


def download_url(url: str, sha256: str | None = None, timeout: float = 30.0) -> Path:
    """Download ``url`` into the cache once; verify size and sha256; rename atomically."""
    dest = url_cache_path(url)
    if dest.exists():
        if sha256 is None or sha256_file(dest).lower() == sha256.lower():
            return dest
        if is_offline():
            _check_sha256(dest, sha256, what=url)  # raises with the details
        dest.unlink()  # stale or damaged cache entry: fetch again
    if is_offline():
        raise OfflineError(_offline_message(url, dest.parent, "HF_HUB_OFFLINE"))
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".part-")
    h = hashlib.sha256()
    got = 0
    try:
        try:
            with urllib.request.urlopen(url, timeout=timeout) as resp, os.fdopen(fd, "wb") as out:
                expected_len = resp.headers.get("Content-Length")
                for chunk in iter(lambda: resp.read(_CHUNK), b""):
                    out.write(chunk)
                    h.update(chunk)
                    got += len(chunk)
                out.flush()
                os.fsync(out.fileno())
        except http.client.IncompleteRead as e:
            raise IntegrityError(f"download of {url} was truncated ({got + len(e.partial)} bytes received, "
                                 f"{e.expected} more expected); nothing was cached. Try again.") from e
        except urllib.error.HTTPError as e:
            raise HubError(f"cannot download {url}: HTTP {e.code} {e.reason}. Check the URL.") from e
        except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
            raise OfflineError(_offline_message(url, dest.parent, "HF_HUB_OFFLINE") + f" (cause: {e})") from e
        if expected_len is not None and got != int(expected_len):
            raise IntegrityError(f"download of {url} was truncated: {got} of {expected_len} bytes; nothing "
                                 "was cached. Try again.")
        digest = h.hexdigest()
        if sha256 is not None and digest.lower() != sha256.lower():
            raise IntegrityError(f"sha256 mismatch for {url}: expected {sha256}, got {digest}; the file was "
                                 "not cached. The source changed or the sha256 in the model card is wrong.")
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return dest


def push_to_hub(folder: str | os.PathLike, repo_id: str, *, private: bool = False,
                revision: str | None = None, commit_message: str = "Upload visionzoo checkpoint",
                token: str | None = None) -> str:
    """Upload a :func:`~visionzoo.checkpoint.save_pretrained` folder to the Hugging Face Hub.

    Returns the commit URL. Requires a token (``hf auth login`` or ``HF_TOKEN``).
    """
    from huggingface_hub import HfApi

    folder = Path(folder)
    if not (folder / "config.json").exists():
        raise HubError(f"{folder} is not a visionzoo checkpoint folder (no config.json); "
                       "write one with save_pretrained() first.")
    if is_offline():
        raise OfflineError("push_to_hub needs the network, but offline mode is on (VISIONZOO_OFFLINE/HF_HUB_OFFLINE).")
    api = HfApi(endpoint=os.environ.get("HF_ENDPOINT") or None, token=token)
    api.create_repo(repo_id, private=private, exist_ok=True)
    info = api.upload_folder(repo_id=repo_id, folder_path=str(folder), revision=revision,
                             commit_message=commit_message)
    return str(getattr(info, "commit_url", info))


def copy_into_cache(path: str | os.PathLike, url: str) -> Path:
    """Seed the URL cache with a file obtained another way (e.g. on a machine with no internet)."""
    dest = url_cache_path(url)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(path, dest)
    return dest
