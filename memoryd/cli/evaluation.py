"""`memoryctl eval`: how well recall finds your own turns, scored by the daemon on this
machine (POST /v1/eval, `memoryd.recall.evaluate`) and printed as a table. Standard library
and `memoryd.client` only: memoryctl must start fast."""

from __future__ import annotations

import argparse

from memoryd.client import MemorydClient

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

EVAL_TIMEOUT_S = 3600.0  # the daemon answers once every probe is searched


def add_parsers(sub: Any) -> None:
    ev = sub.add_parser("eval", help="how well search finds your own turns (R@k, NDCG); "
                                     "scored locally")
    ev.add_argument("--sample", type=int, default=200, help="turns sampled (1-2000, default "
                                                            "200)")
    ev.add_argument("--seed", type=int, default=0, help="the same seed draws the same turns")
    ev.add_argument("--questions", choices=["cloze", "model"], default="cloze",
                    help="cloze: the turn's rarer words, shuffled (default); model: questions "
                         "written by the configured model, if it runs on this machine")
    ev.add_argument("--dry-run", action="store_true", help="time a few probes and say how "
                                                           "long the run would take")
    ev.add_argument("--misses", type=int, default=10, help="misses listed (default 10)")


def cmd_eval(args: argparse.Namespace, c: MemorydClient) -> tuple[Any, Any]:
    c.timeout = max(c.timeout, EVAL_TIMEOUT_S)
    data = c.request("POST", "/v1/eval", {
        "sample": args.sample, "seed": args.seed, "questions": args.questions,
        "dry_run": args.dry_run, "show_misses": args.misses})
    return data, render_eval


def render_eval(d: dict[str, Any]) -> str:
    import textwrap

    kind = f"{d['questions']} probe{'s' if d['probes'] != 1 else ''}"
    if d["dry_run"]:
        est = d["estimate_s"]
        return (f"dry run: {d['probes']} {kind} timed in {d['seconds']:.1f} s, "
                f"{d['sampled']} turns sampled (seed {d['seed']}); the whole run would take "
                f"about {_duration(est)}")
    out = [f"{d['probes']} {kind} from {d['sampled']} sampled turns (seed {d['seed']}), "
           f"{d['seconds']:.1f} s", "",
           f"{'mode':<17}{'R@1':>7}{'R@5':>7}{'R@10':>7}{'NDCG@10':>9}{'any@10':>8}"]
    for s in d["scores"]:
        gate = (f"   vectors added a turn on {s['vector_added']}"
                if s["vector_added"] is not None else "")
        out.append(f"{s['mode']:<17}{s['r1']:>7.3f}{s['r5']:>7.3f}{s['r10']:>7.3f}"
                   f"{s['ndcg10']:>9.3f}{s['any10']:>8.3f}{gate}")
    v = d["vectors"]
    out.append("vectors: " + (f"{v['embedded']} of {v['of']} sampled turns embedded; the "
                              f"turn ranked higher on {v['better']} probes, lower on "
                              f"{v['worse']}" if v["scored"] else
                              f"not scored ({v['reason']})"))
    if d["missed"]:
        shown = len(d["misses"])
        out += ["", f"missed at 10: {d['missed']}"
                + (f" ({shown} shown)" if shown < d["missed"] else "")]
        for m in d["misses"]:
            ranks = "  ".join(f"{mode} {r if r is not None else '>50'}"
                              for mode, r in m["ranks"].items())
            out.append(f"  unit {m['unit_id']} {m['role']} {m['agent']} {m['session_id']}  "
                       f"{ranks}")
            out.append(f"    probe: {m['probe']}")
            out.append(f"    turn:  {' '.join(m['snippet'].split())}")
    if d["suggestions"]:
        out += ["", "suggestions:"]
        for s in d["suggestions"]:
            out += textwrap.wrap(s, 96, initial_indent="  - ", subsequent_indent="    ")
    out += ["", *textwrap.wrap(d["note"], 100)]
    return "\n".join(out)


def _duration(s: float | None) -> str:
    if s is None:
        return "?"
    if s < 10:
        return f"{s:.1f} s"
    if s < 90:
        return f"{s:.0f} s"
    return f"{s / 60:.0f} min"


COMMANDS = {"eval": cmd_eval}
