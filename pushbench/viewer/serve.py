"""Serve a built viewer over HTTP on the loopback interface only.

The server binds ``127.0.0.1`` (never another address: the files hold full episode records,
private to the user) and serves only the files the site holds when the server starts (a
whitelist of relative paths; never a folder listing, never a path outside it), read-only, with
the standard library's file handler. A path that is not plain text (a NUL, bytes that are not
UTF-8, a backslash, not starting with ``/``) is answered 400; any other unknown path 404.
"""

from __future__ import annotations

import functools
import http.server
import os
import threading
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote

LOOPBACK = "127.0.0.1"


class _Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: a page's few files share one connection

    def log_message(self, format, *args):  # the stdlib's signature
        pass  # quiet: the command prints the URL once

    def __init__(self, *args, allowed: frozenset[str], **kwargs):
        self.allowed = allowed
        super().__init__(*args, **kwargs)

    def send_head(self):
        path = self.path.split("?", 1)[0].split("#", 1)[0]
        try:
            rel = unquote(path, errors="strict")
        except UnicodeDecodeError:
            rel = None
        if rel is None or not rel.startswith("/") or "\x00" in rel or "\\" in rel:
            self.send_error(400, "malformed path")
            return None
        rel = rel.lstrip("/") or "index.html"
        if rel not in self.allowed:  # folders are never listed; only the site's own files
            self.send_error(404, "not a file of this viewer")
            return None
        return super().send_head()

    def end_headers(self):
        # The page and its data never change while served; no caching surprises on rebuild.
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        super().end_headers()


def make_server(site: str | Path, port: int = 8765) -> http.server.ThreadingHTTPServer:
    """A server for ``site`` on ``127.0.0.1:port`` (``port=0``: any free port), not started."""
    root = Path(site)
    allowed = frozenset(
        Path(d, f).relative_to(root).as_posix() for d, _, files in os.walk(root) for f in files
    )
    handler = functools.partial(_Handler, directory=str(root), allowed=allowed)
    return http.server.ThreadingHTTPServer((LOOPBACK, port), handler)


def serve(
    site: str | Path,
    port: int = 8765,
    ready: Callable[[str], None] | None = None,
    stop: threading.Event | None = None,
) -> None:
    """Serve ``site`` until interrupted (or ``stop`` is set); ``ready(url)`` once listening."""
    server = make_server(site, port)
    url = f"http://{LOOPBACK}:{server.server_address[1]}/index.html"
    try:
        if ready is not None:
            ready(url)
        if stop is None:
            server.serve_forever()
        else:
            thread = threading.Thread(target=server.serve_forever, daemon=True)
            thread.start()
            stop.wait()
            server.shutdown()
    finally:
        server.server_close()
