"""HTTP/1.1 on a bare socket, for what client libraries hide: a request whose body
arrives in parts, and whether the server closed the connection after a response.
Benchmarks use it too, as a client that takes little of the machine it measures."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator


def request_head(method: str, path: str, headers: dict[str, str]) -> bytes:
    """A request's line and headers, up to the empty line that ends them."""
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


class RawConnection:
    """One TCP connection to the server, spoken to byte by byte."""

    def __init__(self, port: int, timeout: float = 15, receive_buffer: int | None = None
                 ) -> None:
        """``receive_buffer``: the socket's, set before connecting, so that the server
        can send only about that much more than the client read."""
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if receive_buffer is not None:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        self.sock.settimeout(timeout)
        self.sock.connect(("127.0.0.1", port))
        self._buffer = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def request_head(self, method: str, path: str, headers: dict[str, str]) -> None:
        self.send(request_head(method, path, headers))

    def _fill(self) -> bool:
        data = self.sock.recv(65536)
        self._buffer += data
        return bool(data)

    def _take_until(self, marker: bytes) -> bytes:
        while marker not in self._buffer:
            assert self._fill(), f"the connection closed before {marker!r}"
        taken, self._buffer = self._buffer.split(marker, 1)
        return taken

    def _take(self, count: int) -> bytes:
        while len(self._buffer) < count:
            assert self._fill(), "the connection closed inside a body"
        taken, self._buffer = self._buffer[:count], self._buffer[count:]
        return taken

    def head(self) -> tuple[int, dict[str, str]]:
        """The status and headers (lower-case names) of the next response."""
        head = self._take_until(b"\r\n\r\n").decode()
        status_line, *header_lines = head.split("\r\n")
        headers = {name.strip().lower(): value.strip() for name, value in
                   (line.split(":", 1) for line in header_lines)}
        return int(status_line.split()[1]), headers

    def chunks(self) -> Iterator[bytes]:
        """The chunks of a chunked body as they come. The body must end with its last
        chunk: a cut stream fails here."""
        while size := int(self._take_until(b"\r\n").split(b";")[0], 16):
            yield self._take(size)
            assert self._take(2) == b"\r\n"
        assert self._take_until(b"\r\n") == b""  # no trailers

    def lines(self) -> Iterator[bytes]:
        """The lines of a chunked body as they come; the body must end with a newline."""
        pending = b""
        for chunk in self.chunks():
            *complete, pending = (pending + chunk).split(b"\n")
            yield from complete
        assert pending == b"", f"the body ends inside a line: {pending[:200]!r}"

    def response(self) -> tuple[int, dict[str, str], bytes]:
        """The next response: status, headers and the whole body."""
        status, headers = self.head()
        if headers.get("transfer-encoding") == "chunked":
            return status, headers, b"".join(self.chunks())
        return status, headers, self._take(int(headers.get("content-length", "0")))

    def closed_by_server(self, within: float) -> bool:
        """Whether the server closes the connection (end of file, nothing more sent)
        within the given seconds."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                if not self._fill():
                    return self._buffer == b""
            except TimeoutError:
                return False
        return False

    def until_closed(self, within: float) -> bytes:
        """Everything the server sends until it closes the connection (or resets it),
        or until ``within`` seconds passed."""
        deadline = time.monotonic() + within
        try:
            while (left := deadline - time.monotonic()) > 0:
                self.sock.settimeout(left)
                if not self._fill():
                    break
        except (ConnectionResetError, TimeoutError):
            pass
        taken, self._buffer = self._buffer, b""
        return taken

    def close(self) -> None:
        self.sock.close()


def stuck_client(port: int, path: str, headers: dict[str, str] | None = None
                 ) -> RawConnection:
    """A GET whose client reads the response's head and then nothing: with a tiny
    receive buffer, the server's writes soon wait on it (once the server's send
    buffer, up to 4 MiB here, is full too)."""
    connection = RawConnection(port, receive_buffer=4096)
    connection.request_head("GET", path, headers or {})
    status, _ = connection.head()
    assert status == 200
    return connection
