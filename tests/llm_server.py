"""A scripted OpenAI-compatible chat endpoint: the one stand-in the tests allow (for the remote LLM).

It serves POST /v1/chat/completions on 127.0.0.1 from a thread. Each request is answered by the
next scripted Reply in the queue, or, when the queue is empty, by `responder(request_body)`.
A Reply can wait first (to provoke timeouts), fail with an HTTP status, or return any text as the
assistant's message (valid JSON, invalid JSON, …). Every request is recorded, and the server
tracks how many were in flight at once.
"""
from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable


@dataclass
class Reply:
    content: str | dict | None = None   # the assistant message; a dict is sent as JSON text
    status: int = 200                   # anything but 200 is an error response
    delay: float = 0.0                  # seconds to wait before answering

    @classmethod
    def json(cls, obj: dict, delay: float = 0.0) -> "Reply":
        return cls(content=obj, delay=delay)


def completion(model: str, content: str) -> dict:
    return {"id": "chatcmpl-scripted", "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


class ScriptedLLM:
    def __init__(self, responder: Callable[[dict], Reply] | None = None):
        self.responder = responder or (lambda body: Reply.json({"facts": []}))
        self.script: deque[Reply] = deque()
        self.requests: list[dict] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self.port: int | None = None

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self, port: int = 0) -> "ScriptedLLM":
        """Listen on `port` (0: a free one). Calling it again after stop() reuses the same port."""
        self._server = ThreadingHTTPServer(("127.0.0.1", port or self.port or 0), self._handler())
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> "ScriptedLLM":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- scripting ------------------------------------------------------------------------------
    def push(self, *replies: Reply) -> None:
        with self._lock:
            self.script.extend(replies)

    def _next(self, body: dict) -> Reply:
        with self._lock:
            if self.script:
                return self.script.popleft()
        return self.responder(body)

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.requests.append({"path": self.path, "body": body, "at": time.monotonic()})
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    if self.path.rstrip("/") != "/v1/chat/completions":
                        return self._send(404, {"error": {"message": f"no route {self.path}"}})
                    reply = server._next(body)
                    if reply.delay:
                        time.sleep(reply.delay)
                    if reply.status != 200:
                        return self._send(reply.status, {"error": {"message": "scripted failure", "type": "server_error"}})
                    content = reply.content if isinstance(reply.content, str) else json.dumps(reply.content or {}, ensure_ascii=False)
                    self._send(200, completion(body.get("model", "scripted"), content))
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout): nothing to answer
                finally:
                    with server._lock:
                        server.in_flight -= 1

            def _send(self, status: int, payload: dict) -> None:
                data = json.dumps(payload, ensure_ascii=False).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


def user_text(body: dict) -> str:
    """The last user message of a chat request (what the client asked about)."""
    return next((m["content"] for m in reversed(body.get("messages", [])) if m.get("role") == "user"), "")


def system_text(body: dict) -> str:
    return next((m["content"] for m in body.get("messages", []) if m.get("role") == "system"), "")
