"""The container's health check: ``GET /health/live`` on the port gunicorn binds.

Exits 0 when the broker answers 200, 1 otherwise, printing why. Not ``/health``:
an orchestrator that replaces unhealthy containers (Docker Swarm) would replace
every one of them during a dependency's outage, and none could start until it
ends. Standard library only, so the image needs no curl.
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request

HEALTH_PATH = "/health/live"
DEFAULT_BIND = "0.0.0.0:8080"


def health_url(bind: str) -> str:
    """The local URL of ``/health/live`` for gunicorn's ``bind`` (``host:port``)."""
    host, _, port = bind.rpartition(":")
    if host in ("", "0.0.0.0", "[::]", "::"):
        host = "127.0.0.1"
    return f"http://{host}:{port}{HEALTH_PATH}"


def main() -> int:
    url = health_url(os.environ.get("NAKADI_BIND", DEFAULT_BIND))
    try:
        with urllib.request.urlopen(url, timeout=2.5) as response:
            return 0 if response.status == 200 else 1
    except urllib.error.HTTPError as error:
        print(f"{url}: {error.code} {error.read().decode(errors='replace')}", file=sys.stderr)
    except OSError as error:
        print(f"{url}: {error}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
