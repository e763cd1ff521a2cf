"""A small OAuth2 token-info service of the tests' own (and the publish benchmark's):
a threaded ``http.server`` on a free port that answers for the tokens it knows.

Given a ``trustme.CA`` it serves HTTPS, as real token-info services do, with a
certificate of that authority for 127.0.0.1.

Besides valid tokens it knows misbehaving ones: ``garbage-token`` (200 with a
body that is not JSON), ``broken-token`` (500), ``slow-token`` (answers after
``slow_s`` seconds) and ``expired-token`` (``expires_in`` 0). Other tokens get
401, as a real token-info service answers for unknown tokens.
"""

from __future__ import annotations

import json
import ssl
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import trustme

from deploy.localstack import free_port

EMPLOYEES, SERVICES = "/employees", "/services"


class TokenInfoStub:
    def __init__(self, tokens: dict[str, dict], slow_s: float = 3.0,
                 ca: trustme.CA | None = None) -> None:
        """``tokens`` maps each token to its token-info answer (uid, realm, scope...)."""
        self.tokens = tokens
        self.slow_s = slow_s
        self.calls: Counter[str] = Counter()
        self.port = free_port()
        scheme = "https" if ca is not None else "http"
        self.url = f"{scheme}://127.0.0.1:{self.port}/oauth2/tokeninfo"
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        self._server.daemon_threads = True
        if ca is not None:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ca.issue_cert("127.0.0.1").configure_cert(context)
            # The handshake runs in each request's thread, not in the accepting one.
            self._server.socket = context.wrap_socket(
                self._server.socket, server_side=True, do_handshake_on_connect=False)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                header = self.headers.get("Authorization", "")
                token = header.removeprefix("Bearer ")
                stub.calls[token] += 1
                if token == "garbage-token":
                    self._answer(200, b"<html>certainly not token info</html>", "text/html")
                elif token == "broken-token":
                    self._answer(500, b'{"error": "server_error"}')
                elif token == "slow-token":
                    time.sleep(stub.slow_s)
                    self._answer(200, json.dumps({"uid": "slow", "realm": EMPLOYEES,
                                                  "expires_in": 3600}).encode())
                elif token == "expired-token":
                    self._answer(200, json.dumps({"uid": "late", "realm": EMPLOYEES,
                                                  "scope": [], "expires_in": 0}).encode())
                elif token in stub.tokens:
                    self._answer(200, json.dumps({"access_token": "hidden", "expires_in": 3600,
                                                  **stub.tokens[token]}).encode())
                else:
                    self._answer(401, b'{"error": "invalid_token"}')

            def _answer(self, status: int, body: bytes,
                        content_type: str = "application/json") -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the broker gave up waiting (the slow token)

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler

    def start(self) -> TokenInfoStub:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
