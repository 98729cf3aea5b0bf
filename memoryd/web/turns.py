"""A session's turns for reading: user and assistant markdown rendered safely, tool
arguments and results laid out as text (real newlines, not JSON escapes), long outputs
clipped with the full text one link away.

The markdown is CommonMark by markdown-it-py with raw HTML off, so a `<script>` in a turn
stays text; links keep only http, https and mailto targets (a `javascript:` link stays
literal text) and images become plain links (a transcript never loads a remote image)."""

from __future__ import annotations

import json
from typing import Any

from markdown_it import MarkdownIt
from markupsafe import Markup

LINK_SCHEMES = ("http://", "https://", "mailto:")
CLIP_LINES = 40
CLIP_CHARS = 4000


def _safe_link(url: str) -> bool:
    return url.strip().lower().startswith(LINK_SCHEMES)


def _markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
    md.disable("image")  # `![a](u)` reads as "!" and a link: no remote loads
    md.validateLink = _safe_link  # type: ignore[method-assign]

    def link_open(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
        tokens[idx].attrSet("rel", "nofollow noopener noreferrer")
        return str(self.renderToken(tokens, idx, options, env))

    md.add_render_rule("link_open", link_open)
    return md


_MD = _markdown()


def markdown(text: str | None) -> Markup:
    """A turn's text as HTML: every tag in it comes from the markdown, none from the text."""
    return Markup(_MD.render(text or ""))


def _scalar(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str)


def _lay(v: Any, pad: str, out: list[str]) -> None:
    items = list(v.items()) if isinstance(v, dict) else [("-", x) for x in v]
    sep = ":" if isinstance(v, dict) else ""
    for k, x in items:
        if isinstance(x, dict | list) and x:
            out.append(f"{pad}{k}{sep}")
            _lay(x, pad + "  ", out)
        elif isinstance(x, str) and "\n" in x:
            out.append(f"{pad}{k}{sep} |")
            out += [f"{pad}  {line}" for line in x.splitlines()]
        else:
            shown = "{}" if x == {} else "[]" if x == [] else _scalar(x)
            out.append(f"{pad}{k}{sep} {shown}")


def layout(text: str | None) -> str:
    """JSON text laid out for reading (`key: value`, nested keys indented, strings as
    they are with their newlines); anything that is not a JSON object or list as it is."""
    text = text or ""
    s = text.lstrip()
    if not s.startswith(("{", "[")):
        return text
    try:
        v = json.loads(s)
    except (ValueError, RecursionError):
        return text
    if not isinstance(v, dict | list) or not v:
        return text
    out: list[str] = []
    _lay(v, "", out)
    return "\n".join(out)


def tool_text(m: dict[str, Any]) -> str:
    """What a tool call was given (its full arguments when the adapter kept them) or what
    a tool result returned, laid out."""
    if m.get("kind") == "tool_call" and m.get("tool_args"):
        return layout(m["tool_args"])
    return layout(m.get("content"))


def clip(text: str) -> tuple[str, int]:
    """The first CLIP_LINES lines (at most CLIP_CHARS characters) and how many lines
    are left out (0: nothing was clipped)."""
    lines = text.splitlines()
    head = "\n".join(lines[:CLIP_LINES])
    if len(head) > CLIP_CHARS:
        head = head[:CLIP_CHARS]
    if head == text:
        return text, 0
    shown = head.count("\n") + 1
    return head, max(1, len(lines) - shown)
