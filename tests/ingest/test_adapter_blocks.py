"""blocks: content flattening, media placeholders and tool-call rendering."""

from __future__ import annotations

import json

from memoryd.ingest.adapters.blocks import args_json, flatten, media_placeholder, render_call

B64_3KB = "A" * 4096  # 3072 bytes


def test_flatten_strings_and_text_blocks():
    assert flatten("  hi  ") == "hi"
    assert (
        flatten([{"type": "text", "text": "a"}, {"type": "output_text", "text": "b"}, "c"])
        == "a\nb\nc"
    )
    assert (
        flatten([{"type": "thinking", "thinking": "secret"}, {"type": "reasoning", "summary": []}])
        == ""
    )
    assert flatten({"text": "gemini part"}) == "gemini part"
    assert flatten(None) == flatten(3) == flatten(True) == ""


def test_flatten_media_becomes_placeholders():
    anthropic = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": B64_3KB},
    }
    pdf = {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": B64_3KB * 1024},
    }
    pi = {"type": "image", "data": B64_3KB, "mimeType": "image/jpeg"}
    openai = {"type": "input_image", "image_url": "data:image/webp;base64," + B64_3KB}
    chat = {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
    gemini = {"inlineData": {"mimeType": "image/png", "data": B64_3KB}}
    assert flatten([anthropic, pdf, pi, openai, chat, gemini]).splitlines() == [
        "[image image/png, 3 KB]",
        "[document application/pdf, 3.0 MB]",
        "[image image/jpeg, 3 KB]",
        "[image image/webp, 3 KB]",
        "[image https://example.com/cat.png]",
        "[image image/png, 3 KB]",
    ]


def test_flatten_data_urls_inside_text():
    text = "see data:image/png;base64," + B64_3KB + " here"
    assert flatten(text) == "see [image image/png, 3 KB] here"


def test_flatten_tool_results_and_function_responses():
    assert flatten([{"type": "tool_result", "content": [{"type": "text", "text": "out"}]}]) == "out"
    part = {"functionResponse": {"id": "x", "name": "ls", "response": {"output": "a\nb"}}}
    assert flatten([part]) == "a\nb"
    assert flatten([{"functionResponse": {"response": {"error": "denied"}}}]) == "denied"


def test_media_placeholder_sizes():
    assert media_placeholder("image/gif", "QUJD") == "[image image/gif, 3 B]"
    assert media_placeholder(None, None) == "[file application/octet-stream, ?]"


def test_render_call_is_compact_and_cut():
    assert render_call("Read", {"file_path": "/a"}) == 'Read({"file_path":"/a"})'
    assert render_call("ls", "{}") == "ls()"
    assert render_call("f", '{"a": [1, 2]}') == 'f({"a":[1,2]})'
    assert render_call(None, None) == "tool()"
    long = render_call("Write", {"content": "x" * 5000})
    assert len(long) == len("Write()") + 400 and long.endswith("…)")


def test_args_json_is_always_json():
    assert args_json({"a": "é"}) == '{"a": "é"}'
    assert args_json('{"a": 1}') == '{"a": 1}'
    assert json.loads(args_json("not json") or "") == "not json"
    assert args_json(None) is None
