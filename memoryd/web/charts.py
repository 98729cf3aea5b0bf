"""Charts drawn on the server as SVG: no build step, no script, readable without
JavaScript. A chart is a row of days, each a stack of series (agents, or kinds of
memory change), every bar carrying its numbers in a `<title>` (shown on hover and read
by screen readers); the same numbers go in a table beside it (`table`), so nothing is
only in the picture.

Colours come from a fixed palette in series order; markup is built with
`markupsafe.escape` on every value that came from data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

PALETTE = ("#0b5cad", "#e07b00", "#2e8540", "#b42318", "#6f42c1", "#0f8a8a", "#8a6d3b",
           "#c2185b", "#57606a")
WIDTH, HEIGHT, PAD_LEFT, PAD_BOTTOM, PAD_TOP = 720, 180, 44, 22, 8


@dataclass(frozen=True)
class Series:
    name: str
    values: Sequence[float]  # one per day, in the chart's day order


def _nice(top: float) -> float:
    """A round axis maximum at or above `top`."""
    if top <= 0:
        return 1.0
    step = 10 ** (len(str(int(top))) - 1)
    for m in (1, 2, 2.5, 5, 10):
        if m * step >= top:
            return float(m * step)
    return float(10 * step)


def number(v: float) -> str:
    """12 345, 1.2k, 3.4M: what a person reads at a glance."""
    if abs(v) >= 1e6:
        return f"{v / 1e6:.1f}M"
    if abs(v) >= 1e4:
        return f"{v / 1e3:.0f}k"
    if abs(v) >= 1e3:
        return f"{v / 1e3:.1f}k"
    return f"{v:.0f}" if float(v).is_integer() else f"{v:.2f}"


def stacked(days: Sequence[str], series: Sequence[Series], *, label: str, unit: str,
            limit: float | None = None, limit_label: str = "") -> Markup:
    """Stacked bars, one per day; `limit` draws a dashed line (a daily budget)."""
    n = max(1, len(days))
    totals = [sum(s.values[i] for s in series) for i in range(len(days))]
    top = _nice(max([*totals, limit or 0, 0]))
    plot_w, plot_h = WIDTH - PAD_LEFT - 4, HEIGHT - PAD_BOTTOM - PAD_TOP
    bw = plot_w / n
    out = [f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
           f'aria-label="{escape(label)}" preserveAspectRatio="none">']
    for frac in (0, 0.5, 1):
        y = PAD_TOP + plot_h * (1 - frac)
        out.append(f'<line x1="{PAD_LEFT}" x2="{WIDTH}" y1="{y:.1f}" y2="{y:.1f}" '
                   f'class="grid"/><text x="{PAD_LEFT - 4}" y="{y + 4:.1f}" '
                   f'class="axis" text-anchor="end">{escape(number(top * frac))}</text>')
    for i, day in enumerate(days):
        x = PAD_LEFT + i * bw
        base = 0.0
        parts = []
        for k, s in enumerate(series):
            v = s.values[i]
            if v <= 0:
                continue
            h = plot_h * v / top
            y = PAD_TOP + plot_h * (1 - (base + v) / top)
            parts.append(f'<rect x="{x + bw * 0.12:.1f}" y="{y:.1f}" width="{bw * 0.76:.1f}" '
                         f'height="{max(h, 0.5):.1f}" fill="{PALETTE[k % len(PALETTE)]}">'
                         f'<title>{escape(day)} · {escape(s.name)}: '
                         f'{escape(number(v))} {escape(unit)}</title></rect>')
            base += v
        out.append(f'<g class="day" data-day="{escape(day)}" data-total="{totals[i]:g}">'
                   + "".join(parts) + "</g>")
        if n <= 10 or i % 7 == 0 or (i == len(days) - 1 and i % 7 >= 4):
            out.append(f'<text x="{x + bw / 2:.1f}" y="{HEIGHT - 6}" class="axis" '
                       f'text-anchor="middle">{escape(day[5:])}</text>')
    if limit:
        y = PAD_TOP + plot_h * (1 - limit / top)
        out.append(f'<line x1="{PAD_LEFT}" x2="{WIDTH}" y1="{y:.1f}" y2="{y:.1f}" '
                   f'class="limit"><title>{escape(limit_label)}: {escape(number(limit))} '
                   f'{escape(unit)}</title></line>')
    out.append("</svg>")
    legend = "".join(
        f'<li><span class="swatch" style="background:{PALETTE[k % len(PALETTE)]}"></span>'
        f'{escape(s.name)} <small>{escape(number(sum(s.values)))}</small></li>'
        for k, s in enumerate(series))
    return Markup("".join(out) + f'<ul class="legend">{legend}</ul>')


def table(days: Sequence[str], series: Sequence[Series], *, caption: str) -> Markup:
    """The chart's numbers as a table (busiest days first are not reordered: by day)."""
    head = "".join(f'<th scope="col">{escape(s.name)}</th>' for s in series)
    rows = []
    for i, day in enumerate(days):
        cells = "".join(f"<td>{escape(number(s.values[i]))}</td>" for s in series)
        if any(s.values[i] for s in series):
            rows.append(f'<tr><th scope="row">{escape(day)}</th>{cells}</tr>')
    body = "".join(rows) or f'<tr><td colspan="{len(series) + 1}">nothing yet</td></tr>'
    return Markup(f'<table class="list numbers"><caption>{escape(caption)}</caption>'
                  f'<thead><tr><th scope="col">day</th>{head}</tr></thead>'
                  f"<tbody>{body}</tbody></table>")
