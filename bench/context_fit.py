"""Fitting one context item into its token budget (`memoryd.fit.fit`), before and
after it encoded once and cut on token boundaries, against a raw baseline: a single
tiktoken encode of the same text, in the same run.

    .venv/bin/python bench/context_fit.py            # 200 rounds per size
    .venv/bin/python bench/context_fit.py --quick    # 40 rounds
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness as h  # noqa: E402
import tiktoken  # noqa: E402

from memoryd.fit import TRIM_MARK  # noqa: E402
from memoryd.fit import fit as _fit
from memoryd.tokens import count_tokens, tokenizer_name  # noqa: E402


def fit_before(text: str, budget: int) -> tuple[str, bool]:
    """`_fit` as it was before issue 15: a binary search on characters that
    re-tokenizes the candidate prefix on every probe."""
    if count_tokens(text) <= budget:
        return text, False
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count_tokens(text[:mid] + TRIM_MARK) <= budget:
            lo = mid
        else:
            hi = mid - 1
    cut = text[:lo]
    for sep in ("\n", " "):
        at = cut.rfind(sep)
        if at > lo * 0.6:
            cut = cut[:at]
            break
    return cut.rstrip() + TRIM_MARK, True


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=200)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--budget", type=int, default=500, help="tokens one item may take")
    args = p.parse_args()
    rounds = 40 if args.quick else args.rounds
    assert tokenizer_name() == "cl100k_base", "no tokenizer: nothing to compare"
    enc = tiktoken.get_encoding("cl100k_base")
    rng = random.Random(1)
    gen = h.TextGen()
    # the synthetic corpus text (bench/README.md): Zipf English, a fifth of it Chinese
    texts = {n: gen.english(rng, n * 4 // 5) + "\n" + gen.chinese(rng, n // 5)
             for n in (2_000, 20_000, 100_000)}
    print(f"_fit, budget {args.budget} tokens, {rounds} rounds per size (times in ms)")
    print(f"{'chars':>8} {'side':<24} {'p50':>8} {'p99':>8}")
    for n, text in texts.items():
        sides = {"raw: one encode": lambda t=text: enc.encode(t, disallowed_special=()),
                 "before: char search": lambda t=text: fit_before(t, args.budget),
                 "after: encode once": lambda t=text: _fit(t, args.budget)}
        times: dict[str, list[float]] = {k: [] for k in sides}
        order = list(sides)
        for i in range(rounds):
            for k in order[i % 3:] + order[:i % 3]:  # rotate so noise hits every side
                t0 = time.perf_counter()
                sides[k]()
                times[k].append((time.perf_counter() - t0) * 1000)
        for k, ts in times.items():
            ts.sort()
            p50, p99 = ts[len(ts) // 2], ts[min(len(ts) - 1, int(len(ts) * .99))]
            print(f"{n:>8} {k:<24} {p50:>8.2f} {p99:>8.2f}")


if __name__ == "__main__":
    main()
