"""A file server on 127.0.0.1 (ephemeral port) that speaks plain HTTP and the Hub's resolve API.

``files`` maps URL paths to bytes. Hub files live at ``/<org>/<repo>/resolve/<rev>/<file>`` and
are answered with the headers huggingface_hub expects (X-Repo-Commit, ETag, Content-Length).
``truncate`` names paths whose body is cut short while Content-Length announces the full size.
"""

from __future__ import annotations

import hashlib
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

COMMIT = "0123456789abcdef0123456789abcdef01234567"
_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")


class LoopbackServer:
    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.truncate: set[str] = set()
        self.requests: list[tuple[str, str]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def _lookup(self) -> tuple[bytes | None, dict[str, str]]:
                path = self.path.split("?", 1)[0]
                server.requests.append((self.command, path))
                m = _RESOLVE.match(path)
                if m:
                    key = f"/{m['repo']}/resolve/main/{m['file']}"
                    body = server.files.get(key)
                    headers = {"X-Repo-Commit": COMMIT}
                    if body is not None:
                        headers["ETag"] = '"' + hashlib.sha256(body).hexdigest() + '"'
                    return body, headers
                return server.files.get(path), {}

            def _send(self, with_body: bool) -> None:
                body, headers = self._lookup()
                if body is None:
                    self.send_response(404)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("X-Error-Code", "EntryNotFound")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if with_body:
                    path = self.path.split("?", 1)[0]
                    self.wfile.write(body[: len(body) // 2] if path in server.truncate else body)

            def do_HEAD(self):
                self._send(False)

            def do_GET(self):
                self._send(True)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def add_hub_file(self, repo: str, filename: str, data: bytes) -> None:
        self.files[f"/{repo}/resolve/main/{filename}"] = data

    def __enter__(self) -> LoopbackServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
