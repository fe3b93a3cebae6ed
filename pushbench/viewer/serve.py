"""Serve a built viewer over HTTP on the loopback interface only.

The server binds ``127.0.0.1`` (never another address: the files hold full episode records,
private to the user) and serves only the viewer's directory, read-only, with the standard
library's file handler.
"""

from __future__ import annotations

import functools
import http.server
import threading
from collections.abc import Callable
from pathlib import Path

LOOPBACK = "127.0.0.1"


class _Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: a page's few files share one connection
    def log_message(self, format, *args):  # noqa: A002 - the stdlib's signature
        pass  # quiet: the command prints the URL once

    def end_headers(self):
        # The page and its data never change while served; no caching surprises on rebuild.
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        super().end_headers()


def make_server(site: str | Path, port: int = 8765) -> http.server.ThreadingHTTPServer:
    """A server for ``site`` on ``127.0.0.1:port`` (``port=0``: any free port), not started."""
    handler = functools.partial(_Handler, directory=str(Path(site)))
    return http.server.ThreadingHTTPServer((LOOPBACK, port), handler)


def serve(site: str | Path, port: int = 8765, ready: Callable[[str], None] | None = None,
          stop: threading.Event | None = None) -> None:
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
