"""FakeLLM: a small OpenAI-compatible server for tests and benchmarks.

It serves `POST /v1/chat/completions` and `GET /v1/models` on 127.0.0.1 (port 0) and
answers like a model would, so litellm reaches it through `api_base` exactly as it
would reach a real server:

- `.replies`: scripted completions (str content, or a dict `{"content"}` or
  `{"status"}`), consumed in order; when empty, a deterministic echo: for a one-liner
  batch (an `<items>` block of `### <id> |` items) a JSON array naming every item,
  otherwise `"Summary: "` plus the first words of the conversation it was sent;
- `.requests`: every request body received, in order (before any scripted failure);
- `.fail_next(status, times)`: the next `times` requests get an OpenAI-style error;
- `.delay_next(seconds, times)`: the next requests wait that long before answering;
- `.garbage_next(times)`: the next answers are well-formed HTTP carrying malformed content.

Usage token counts are reported with memoryd's own estimate, so budgets are predictable.
"""

from __future__ import annotations

import asyncio
import collections
import json
import re
import time
from typing import Any

from aiohttp import web

from memoryd.tokens import estimate_tokens

ITEM = re.compile(r"^### (\d+) \|", re.MULTILINE)
ITEMS = re.compile(r"<items>\n(.*?)</items>", re.DOTALL)
CONVERSATION = re.compile(r"<conversation>\n(.*?)</conversation>", re.DOTALL)
GARBAGE = "}{\x00 ]] ::"


class FakeLLM:
    def __init__(self) -> None:
        self.replies: collections.deque[str | dict[str, Any]] = collections.deque()
        self.requests: list[dict[str, Any]] = []
        self._fail: collections.deque[int] = collections.deque()
        self._delay: collections.deque[float] = collections.deque()
        self._garbage = 0
        self.summary_words = 16  # length of the echo summary (benchmarks use a realistic 180)
        self.app = web.Application()
        self.app.router.add_post("/v1/chat/completions", self._complete)
        self.app.router.add_get("/v1/models", self._models)
        self._runner: web.AppRunner | None = None
        self.url = ""

    # -- scripting ----------------------------------------------------------------------

    def fail_next(self, status: int, times: int = 1) -> None:
        self._fail.extend([status] * times)

    def delay_next(self, seconds: float, times: int = 1) -> None:
        self._delay.extend([seconds] * times)

    def garbage_next(self, times: int = 1) -> None:
        self._garbage += times

    # -- serving (standalone; tests may also use pytest-aiohttp's aiohttp_server) --------

    async def start(self) -> str:
        self._runner = web.AppRunner(self.app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}/v1"
        return self.url

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # -- inspection ---------------------------------------------------------------------

    def prompts(self) -> list[str]:
        """Every request's messages joined into one text, in order."""
        return ["\n".join(str(m.get("content", "")) for m in r.get("messages", []))
                for r in self.requests]

    def input_tokens(self) -> int:
        return sum(estimate_tokens(p) for p in self.prompts())

    # -- handlers -----------------------------------------------------------------------

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list",
                                  "data": [{"id": "fake", "object": "model", "owned_by": "me"}]})

    async def _complete(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        if self._delay:
            await asyncio.sleep(self._delay.popleft())
        if self._fail:
            status = self._fail.popleft()
            return _error(status)
        text = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
        if self._garbage:
            self._garbage -= 1
            content = GARBAGE
        elif self.replies:
            reply = self.replies.popleft()
            if isinstance(reply, dict):
                if "status" in reply:
                    return _error(int(reply["status"]))
                content = str(reply.get("content", ""))
            else:
                content = reply
        else:
            content = echo(text, self.summary_words)
        return web.json_response({
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "fake"),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": estimate_tokens(text),
                      "completion_tokens": estimate_tokens(content),
                      "total_tokens": estimate_tokens(text) + estimate_tokens(content)},
        })


def echo(prompt: str, words: int = 16) -> str:
    """The deterministic default answer to a prompt."""
    items = ITEMS.search(prompt)
    if items:
        ids = ITEM.findall(items.group(1))
        return json.dumps([{"id": int(i), "summary": f"fake one-liner {i}"} for i in ids])
    m = CONVERSATION.search(prompt)
    return "Summary: " + " ".join((m.group(1) if m else prompt).split()[:words])


def _error(status: int) -> web.Response:
    kind = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
            404: "not_found_error", 429: "rate_limit_error"}.get(status, "server_error")
    return web.json_response(
        {"error": {"message": f"fake error {status}", "type": kind, "code": str(status)}},
        status=status)
