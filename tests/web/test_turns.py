"""A session's turns for reading without a browser (issue 30): the markdown renderer's
safety rules, tool JSON laid out, clipping, and session pages with and without seq gaps
on a real SQLite store."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

from memoryd.store.migrations import migrate
from memoryd.web import session_page, turns


def test_issue_30_markdown_keeps_only_safe_links_and_no_raw_html():
    html = str(turns.markdown(
        "<b onclick=x>hi</b> [a](javascript:alert(1)) [b](JAVASCRIPT:x) [c](data:text/html,x) "
        "[d](vbscript:x) [e](/memory) [f](https://ok.example/p?q=1) [g](mailto:a@b.c) "
        "![h](http://img.example/t.png)\n\n```html\n<script>x</script>\n```"))
    assert "<b" not in html and "&lt;b onclick=x&gt;" in html
    hrefs = [p.split('"')[0] for p in html.split('href="')[1:]]
    assert hrefs == ["https://ok.example/p?q=1", "mailto:a@b.c", "http://img.example/t.png"]
    assert "<img" not in html
    assert '<pre><code class="language-html">&lt;script&gt;x&lt;/script&gt;\n</code></pre>' in html


def test_issue_30_tool_json_laid_out_with_real_newlines():
    text = turns.layout('{"command": "ls\\ncat x", "edits": [{"old": "a", "new": "b\\nc"}], '
                        '"n": 3, "ok": true, "none": null, "empty": {}}')
    assert text == ("command: |\n  ls\n  cat x\nedits:\n  -\n    old: a\n    new: |\n      b\n"
                    "      c\nn: 3\nok: true\nnone: null\nempty: {}")
    assert turns.layout("plain output\nline 2") == "plain output\nline 2"
    assert turns.layout("[not json") == "[not json"
    call = {"kind": "tool_call", "content": 'Bash({"command":"ls…', "tool_args": '{"a": 1}'}
    assert turns.tool_text(call) == "a: 1"  # the full arguments, not the cut preview


def test_issue_30_long_output_clipped_short_output_whole():
    assert turns.clip("a\nb") == ("a\nb", 0)
    head, left = turns.clip("\n".join(str(i) for i in range(100)))
    assert head.splitlines()[-1] == str(turns.CLIP_LINES - 1) and left == 100 - turns.CLIP_LINES
    head, left = turns.clip("x" * 10_000)
    assert len(head) == turns.CLIP_CHARS and left == 1


def _store(tmp_path, seqs: list[int]) -> sqlite3.Connection:
    tmp_path.mkdir()
    c = sqlite3.connect(tmp_path / "m.db")
    c.row_factory = sqlite3.Row
    migrate(c)
    c.execute("INSERT INTO sessions (id, agent, session_id, created_at, updated_at) "
              "VALUES (1, 'a', 's', 0, 0)")
    c.executemany("INSERT INTO units (session_pk, record_id, seq, turn, role, kind, content, "
                  "ts, chars, tokens) VALUES (1, ?, ?, ?, 'user', 'message', ?, 0, 0, 0)",
                  [(f"r{s}", s, (s + 1) // 2, f"m{s}") for s in seqs])
    return c


def test_issue_30_session_pages_the_same_with_or_without_seq_gaps(tmp_path):
    dense = _store(tmp_path / "d", list(range(1, 251)))
    gappy_seqs = [s for s in range(1, 301) if s % 6 != 0]  # 250 units, gaps in seq
    gappy = _store(tmp_path / "g", gappy_seqs)
    for c, seqs, is_dense in ((dense, list(range(1, 251)), True), (gappy, gappy_seqs, False)):
        pages = session_page.Pages(c, 1)
        assert pages.dense is is_dense and pages.total == 250 and pages.count == 3
        for p in (1, 2, 3):
            got = [r["seq"] for r in pages.rows(p, "u.seq")]
            assert got == seqs[(p - 1) * 100: p * 100]
            assert all(pages.of(s) == p for s in got)
        assert [x["n"] for x in pages.pager(2)] == [1, 2, 3]
        assert pages.pager(3)[2]["turn"] == (seqs[200] + 1) // 2


def test_issue_30_the_page_modules_load_no_markdown_library_at_daemon_start():
    """The route table imports the page modules when the daemon starts; markdown-it-py (a few
    hundred ms to import on a busy machine) waits for the first page that shows a turn."""
    code = ("import sys; import memoryd.web.session_page, memoryd.web.timeline; "
            "print('markdown_it' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
