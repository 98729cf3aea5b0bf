"""The floor plan holds: imports run one way (issue 29).

memoryd's wings stand on floors. A module may import its own wing, and any wing on a
lower floor; never a wing on its own floor or above. No two files import each other,
directly or round a circle, counting imports made inside functions. Imports under
`if TYPE_CHECKING:` are left out: they never run and only name a type for annotations.

Read from the source with `ast` (nothing is imported), so a move that breaks the plan
fails here with the file and the import that broke it."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "memoryd"

# floor of each wing; the top-level modules (config, paths, errors, log, models, api,
# client, events, llm, tokens, ...) are the foundations every wing may use
FLOORS = {
    "runtime": 0,     # process mechanics: the background thread, rest, sd_notify
    "redact": 1,      # secrets out of everything, logs included
    "": 2,            # the foundations (top-level modules)
    "store": 3,       # the truth: SQL in sync functions, one writer thread
    "index": 4,       # the local search index
    "memory": 4,      # the files of the memory folder
    "jobs": 4,        # the persistent job queue
    "embed": 4,       # local embeddings: the model and its background worker (optional)
    "ingest": 5,      # transcripts in: adapters, cursor, watcher
    "fleet": 5,       # following a shared store into a local index
    "recall": 5,      # retrieval, search, context
    "summarize": 6,   # summaries and one-liners
    "consolidate": 7,  # what memory keeps and drops
    "move": 7,        # moving a history between stores
    "http": 8,        # what both HTTP wings stand on: Route, Services, JSON in and out
    "server": 9,      # the HTTP API
    "web": 9,         # the web page (beside the API: neither imports the other)
    "daemon": 10,     # the composition root (joins the API's and the page's routes)
    "cli": 11,        # memoryd and memoryctl
}
TOP_ONLY = {"__main__"}  # the entry point: above everything

# Imports that still run the wrong way, each to go (issue 29): the list may only shrink.
KNOWN_WRONG: set[str] = set()
KNOWN_CIRCLES: list[list[str]] = []


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(p): p for p in PACKAGE.rglob("*.py")}


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text("utf-8"))
    typing_only = {id(n) for i in ast.walk(tree)
                   if isinstance(i, ast.If) and "TYPE_CHECKING" in ast.unparse(i.test)
                   for b in i.body for n in ast.walk(b)}
    out: set[str | None] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            out.update(_resolve(a.name) for a in node.names if a.name.startswith("memoryd"))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("memoryd"):
            for a in node.names:  # `from memoryd.x import y`: y is a module or a name in x
                sub = f"{node.module}.{a.name}"
                out.add(sub if sub in MODULES else _resolve(node.module or ""))
    return {m for m in out if m}


GRAPH = {m: _imports(p) - {m} for m, p in MODULES.items()}


def _wing(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 1 and (PACKAGE / parts[1]).is_dir():
        return parts[1]
    return "__main__" if parts[-1] == "__main__" else ""


def _floor(module: str) -> float:
    w = _wing(module)
    return float("inf") if w in TOP_ONLY else FLOORS[w]


def test_every_wing_has_a_floor():
    wings = {p.name for p in PACKAGE.iterdir()
             if p.is_dir() and (p / "__init__.py").exists()}
    assert wings <= FLOORS.keys(), f"give these wings a floor: {sorted(wings - FLOORS.keys())}"


def test_imports_run_down():
    wrong = sorted(f"{a} -> {b}" for a, bs in GRAPH.items() for b in bs
                   if _wing(a) != _wing(b) and _floor(b) >= _floor(a))
    assert [w for w in wrong if w not in KNOWN_WRONG] == []
    assert [k for k in sorted(KNOWN_WRONG) if k not in wrong] == [], "gone: strike them"


def test_no_import_circles():
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                circles.append(sorted(group))

    for m in GRAPH:
        if m not in index:
            visit(m)
    assert [c for c in circles if c not in KNOWN_CIRCLES] == []
    assert [k for k in KNOWN_CIRCLES if k not in circles] == [], "gone: strike them"


def test_the_check_sees_imports_inside_functions():
    """The walk is not fooled by a deferred import (the way circles used to be hidden)."""
    assert "memoryd.cli.commands" in GRAPH["memoryd.cli.memoryctl"]
