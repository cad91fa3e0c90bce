"""Loopback replay server core: a ThreadingHTTPServer on 127.0.0.1, a request log and a fault plan."""

from __future__ import annotations

import socket
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

# The shape of the JSON NCBI sends with HTTP 429 over the rate limit (modelled, not a recorded file).
NCBI_RATE_LIMIT_BODY = b'{"error":"API rate limit exceeded","count":"4","limit":"3"}\n'
GATEWAY_ERROR_PAGE = (
    b"<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center></body></html>\n"
)
MAINTENANCE_PAGE = (
    b"<!DOCTYPE html><html><head><title>Service unavailable</title></head><body><h1>The service is "
    b"temporarily unavailable</h1><p>Please try again later.</p></body></html>\n"
)


@dataclass(frozen=True)
class Reply:
    """An answer; with `stream`, the body is written piece by piece as the pieces are made (no Content-Length, the
    connection closes at its end), as a server streaming a reply sends its first tokens before the last exist."""

    status: int
    body: bytes
    content_type: str
    headers: Mapping[str, str] = field(default_factory=dict)
    stream: Iterable[bytes] | None = None

    def whole(self) -> Reply:
        """The same answer with its body in one piece (for the faults that cut a body)."""
        if self.stream is None:
            return self
        return Reply(self.status, self.body + b"".join(self.stream), self.content_type, self.headers)


def in_batches(pieces: Iterable[bytes], size: int = 256) -> Iterator[bytes]:
    """`pieces` joined `size` at a time (a streamed reply written in fewer, larger writes)."""
    batch: list[bytes] = []
    for piece in pieces:
        batch.append(piece)
        if len(batch) == size:
            yield b"".join(batch)
            batch = []
    if batch:
        yield b"".join(batch)


@dataclass(frozen=True)
class Fault:
    """One injected failure. kinds: pass, status, delay, truncate, short_read, content_type, reset."""

    kind: str
    status: int = 502
    body: bytes = b""
    content_type: str = "text/html"
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    keep: float = 0.5  # fraction of the real body sent by truncate / short_read

    @classmethod
    def passthrough(cls) -> Fault:
        """Serve this request normally (to let the first N requests through)."""
        return cls("pass")

    @classmethod
    def http(cls, status: int = 502, body: bytes = GATEWAY_ERROR_PAGE, content_type: str = "text/html") -> Fault:
        return cls("status", status=status, body=body, content_type=content_type)

    @classmethod
    def rate_limited(cls, retry_after: float = 1.0) -> Fault:
        return cls("status", status=429, body=NCBI_RATE_LIMIT_BODY, content_type="application/json",
                   headers={"Retry-After": f"{retry_after:g}"})  # fmt: skip

    @classmethod
    def slow(cls, delay_s: float) -> Fault:
        """Answer normally, but only after `delay_s` (longer than the client timeout)."""
        return cls("delay", delay_s=delay_s)

    @classmethod
    def truncated(cls, keep: float = 0.5) -> Fault:
        """A well-framed HTTP 200 whose body is the first `keep` of the real one (cut XML/JSON)."""
        return cls("truncate", keep=keep)

    @classmethod
    def short_read(cls, keep: float = 0.5) -> Fault:
        """Content-Length of the whole body, then the connection closes part-way."""
        return cls("short_read", keep=keep)

    @classmethod
    def html_page(cls, status: int = 200) -> Fault:
        """A maintenance page served as text/html instead of the API's answer."""
        return cls("content_type", status=status, body=MAINTENANCE_PAGE, content_type="text/html; charset=UTF-8")

    @classmethod
    def reset(cls) -> Fault:
        """Close the connection without answering."""
        return cls("reset")

    @classmethod
    def recorded(cls, path: Path, status: int, content_type: str) -> Fault:
        """Serve a recorded error body (e.g. Crossref's 500 exception JSON) with its status and content type."""
        return cls("status", status=status, body=path.read_bytes(), content_type=content_type)


@dataclass(frozen=True)
class RequestRecord:
    """What the server saw: monotonic arrival time, method, path, parameters (query + form), headers."""

    t: float
    method: str
    path: str
    params: Mapping[str, list[str]]
    headers: Mapping[str, str]
    fault: str | None

    def param(self, name: str) -> str | None:
        values = self.params.get(name)
        return values[0] if values else None


class _Handler(BaseHTTPRequestHandler):
    server_version = "ra-replay/1"
    protocol_version = "HTTP/1.0"

    def do_GET(self) -> None:  # noqa: N802 - http.server API
        self.server.replay._dispatch(self, "GET")  # type: ignore[attr-defined]

    def do_POST(self) -> None:  # noqa: N802
        self.server.replay._dispatch(self, "POST")  # type: ignore[attr-defined]

    def log_message(self, format: str, *args) -> None:  # silence stderr access logs
        pass


class ReplayServer:
    """Base class: subclasses implement `respond(method, path, params) -> Reply` from recorded files.

    Use as a context manager; `base_url` points at the free loopback port picked at start.
    """

    def __init__(self) -> None:
        self.requests: list[RequestRecord] = []
        self._lock = threading.Lock()
        self._queued: dict[str, deque[Fault]] = {}
        self._always: dict[str, Fault] = {}
        self._stop = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> ReplayServer:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.replay = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name=type(self).__name__, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ReplayServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # ------------------------------------------------------------------ faults
    def inject(self, path_prefix: str, *faults: Fault) -> None:
        """Queue faults for the next requests whose path starts with `path_prefix` (one fault per request)."""
        with self._lock:
            self._queued.setdefault(path_prefix, deque()).extend(faults)

    def inject_always(self, path_prefix: str, fault: Fault | None) -> None:
        """Fail every matching request with `fault` until cleared (None clears)."""
        with self._lock:
            if fault is None:
                self._always.pop(path_prefix, None)
            else:
                self._always[path_prefix] = fault

    def clear_faults(self) -> None:
        with self._lock:
            self._queued.clear()
            self._always.clear()

    def _next_fault(self, path: str) -> Fault | None:
        with self._lock:
            for prefix, queue in self._queued.items():
                if queue and path.startswith(prefix):
                    return queue.popleft()
            for prefix, fault in self._always.items():
                if path.startswith(prefix):
                    return fault
        return None

    # ------------------------------------------------------------------ request log
    def requests_to(self, path_suffix: str = "") -> list[RequestRecord]:
        with self._lock:
            return [r for r in self.requests if r.path.endswith(path_suffix)]

    def max_per_window(self, window_s: float = 1.0, path_suffix: str = "") -> int:
        """The most requests that arrived within any `window_s`-long interval (server clock)."""
        times = sorted(r.t for r in self.requests_to(path_suffix))
        best, lo = 0, 0
        for hi, t in enumerate(times):
            while t - times[lo] >= window_s:
                lo += 1
            best = max(best, hi - lo + 1)
        return best

    # ------------------------------------------------------------------ serving
    def respond(self, method: str, path: str, params: dict[str, list[str]]) -> Reply:
        raise NotImplementedError

    def _dispatch(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        arrived = time.monotonic()
        parts = urlsplit(handler.path)
        params = parse_qs(parts.query, keep_blank_values=True)
        if method == "POST":
            length = int(handler.headers.get("Content-Length") or 0)
            form = handler.rfile.read(length).decode("utf-8") if length else ""
            for key, values in parse_qs(form, keep_blank_values=True).items():
                params.setdefault(key, []).extend(values)
        fault = self._next_fault(parts.path)
        record = RequestRecord(arrived, method, parts.path, params, dict(handler.headers.items()),
                               fault.kind if fault and fault.kind != "pass" else None)  # fmt: skip
        with self._lock:
            self.requests.append(record)
        try:
            self._serve(handler, method, parts.path, params, fault)
        except (TimeoutError, BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout fault) or we cut the connection on purpose

    def _serve(self, handler, method: str, path: str, params: dict[str, list[str]], fault: Fault | None) -> None:
        if fault is not None and fault.kind == "reset":
            handler.close_connection = True
            handler.connection.shutdown(socket.SHUT_RDWR)
            return
        if fault is not None and fault.kind in ("status", "content_type"):
            self._write(handler, Reply(fault.status, fault.body, fault.content_type, fault.headers))
            return
        if fault is not None and fault.kind == "delay":
            if self._stop.wait(fault.delay_s):
                return
        reply = self.respond(method, path, params)
        if fault is not None and fault.kind in ("truncate", "short_read"):
            reply = reply.whole()
        if fault is not None and fault.kind == "truncate":
            reply = Reply(reply.status, reply.body[: int(len(reply.body) * fault.keep)], reply.content_type,
                          reply.headers)  # fmt: skip
        if fault is not None and fault.kind == "short_read":
            cut = int(len(reply.body) * fault.keep)
            self._write(handler, reply, body=reply.body[:cut])
            handler.close_connection = True
            handler.wfile.flush()
            handler.connection.shutdown(socket.SHUT_RDWR)
            return
        self._write(handler, reply)

    @staticmethod
    def _write(handler, reply: Reply, body: bytes | None = None) -> None:
        streamed = reply.stream is not None and body is None
        handler.send_response(reply.status)
        handler.send_header("Content-Type", reply.content_type)
        if not streamed:
            handler.send_header("Content-Length", str(len(reply.body)))
        for key, value in reply.headers.items():
            handler.send_header(key, value)
        handler.end_headers()
        if not streamed:
            handler.wfile.write(reply.body if body is None else body)
            return
        handler.close_connection = True  # HTTP/1.0 without Content-Length: the body ends with the connection
        handler.wfile.write(reply.body)
        for piece in reply.stream or ():
            handler.wfile.write(piece)
            handler.wfile.flush()
