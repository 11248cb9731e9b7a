"""Small pictures as inline SVG made on the server: a note's neighbourhood, and line charts.

Hand-made rather than a plotting library: both pictures are a few dozen elements, the page must
work offline and under a strict Content-Security-Policy (no inline styles or scripts: colours are
CSS classes from ``static/app.css``), and every label is note text, so everything that goes into
the markup passes through ``markupsafe.escape``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

from .markdown import note_href


@dataclass
class Node:
    path: str
    title: str
    hops: int  # 0 for the note itself
    direction: str = ""  # out, in, both (hop 1); for hop 2 the second step
    via: str | None = None  # hop-1 note a hop-2 note hangs off
    backlinks: int = 0


def _label(text: str, limit: int = 22) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def neighbourhood(centre: Node, near: Sequence[Node], *, width: int = 640, height: int = 440,
                  max_first: int = 14, max_second: int = 20) -> tuple[Markup, int]:
    """A radial picture: the note in the middle, direct neighbours on the inner ring, two-hop
    neighbours on the outer ring next to the neighbour they hang off. Returns (svg, notes left out).

    The nearest and most linked-to neighbours are drawn first; a hub's thousands are cut to
    ``max_first`` + ``max_second`` (the lists below the picture have them all)."""
    cx, cy = width / 2, height / 2
    r1, r2 = min(width, height) * 0.27, min(width, height) * 0.45
    first = sorted((n for n in near if n.hops == 1), key=lambda n: (-n.backlinks, n.path))[:max_first]
    shown_first = {n.path for n in first}
    second = sorted((n for n in near if n.hops == 2 and n.via in shown_first),
                    key=lambda n: (-n.backlinks, n.path))[:max_second]
    left_out = len(near) - len(first) - len(second)
    pos: dict[str, tuple[float, float]] = {centre.path: (cx, cy)}
    angle: dict[str, float] = {}
    for i, n in enumerate(first):
        a = -math.pi / 2 + 2 * math.pi * i / max(1, len(first))
        angle[n.path] = a
        pos[n.path] = (cx + r1 * math.cos(a), cy + r1 * math.sin(a))
    by_via: dict[str, list[Node]] = {}
    for n in second:
        by_via.setdefault(n.via or "", []).append(n)
    spread = 2 * math.pi / max(1, len(first))
    for via, group in by_via.items():
        base = angle.get(via, 0.0)
        for j, n in enumerate(group):
            offset = (j - (len(group) - 1) / 2) * min(spread / max(1, len(group)), 0.35)
            a = base + offset
            pos[n.path] = (cx + r2 * math.cos(a), cy + r2 * math.sin(a))
    parts = [f'<svg class="graph" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
             f'role="img" aria-label="links around {escape(centre.title)}" xmlns="http://www.w3.org/2000/svg">',
             '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" '
             'orient="auto-start-reverse"><path class="arrowhead" d="M 0 0 L 10 5 L 0 10 z"/></marker></defs>']

    def edge(a: str, b: str, direction: str, cls: str) -> None:
        (x1, y1), (x2, y2) = pos[a], pos[b]
        # shorten so arrowheads stop at the node's edge
        dx, dy = x2 - x1, y2 - y1
        d = math.hypot(dx, dy) or 1.0
        pad = 9.0
        x1s, y1s, x2s, y2s = x1 + dx / d * pad, y1 + dy / d * pad, x2 - dx / d * pad, y2 - dy / d * pad
        start = ' marker-start="url(#arrow)"' if direction in ("in", "both") else ""
        end = ' marker-end="url(#arrow)"' if direction in ("out", "both") else ""
        parts.append(f'<line class="{cls}" x1="{x1s:.1f}" y1="{y1s:.1f}" x2="{x2s:.1f}" y2="{y2s:.1f}"{start}{end}/>')

    for n in first:
        edge(centre.path, n.path, n.direction, "edge1")
    for n in second:
        edge(n.via or centre.path, n.path, n.direction.split(">")[-1] if n.direction else "", "edge2")

    def node(n: Node, cls: str, radius: float) -> None:
        x, y = pos[n.path]
        anchor = "middle" if abs(x - cx) < 40 else ("start" if x > cx else "end")
        tx = x if anchor == "middle" else (x + radius + 4 if anchor == "start" else x - radius - 4)
        ty = y - radius - 5 if anchor == "middle" and y < cy else (y + radius + 13 if anchor == "middle" else y + 4)
        parts.append(f'<a href="{escape(note_href(n.path))}"><title>{escape(n.title)} ({escape(n.path)})</title>'
                     f'<circle class="{cls}" cx="{x:.1f}" cy="{y:.1f}" r="{radius}"/>'
                     f'<text class="label {cls}-label" x="{tx:.1f}" y="{ty:.1f}" text-anchor="{anchor}">'
                     f'{escape(_label(n.title))}</text></a>')

    for n in second:
        node(n, "node2", 5)
    for n in first:
        node(n, "node1", 7)
    x, y = pos[centre.path]
    parts.append(f'<circle class="node0" cx="{x:.1f}" cy="{y:.1f}" r="10"><title>{escape(centre.title)}</title></circle>'
                 f'<text class="label node0-label" x="{x:.1f}" y="{y + 26:.1f}" text-anchor="middle">'
                 f'{escape(_label(centre.title, 30))}</text>')
    parts.append("</svg>")
    return Markup("".join(parts)), max(0, left_out)


@dataclass
class Series:
    name: str
    points: list[tuple[float, float, str]]  # (x, y, tooltip)
    cls: str  # CSS class: line colour


def line_chart(series: Sequence[Series], *, y_min: float = 0.0, y_max: float = 1.0, y_format: str = "{:.0%}",
               x_labels: Sequence[tuple[float, str]] = (), guide: tuple[float, str] | None = None,
               width: int = 640, height: int = 220, label: str = "chart") -> Markup:
    """Lines with dots over a shared x axis (e.g. time); ``guide`` is a dashed horizontal line (a
    threshold). Every dot has a tooltip."""
    left, right, top, bottom = 48, 16, 14, 30
    xs = [x for s in series for x, _, _ in s.points]
    if not xs:
        return Markup("")
    x0, x1 = min(xs), max(xs)
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1

    def px(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * (width - left - right)

    def py(y: float) -> float:
        y = min(max(y, y_min), y_max)
        return top + (1 - (y - y_min) / ((y_max - y_min) or 1)) * (height - top - bottom)

    parts = [f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
             f'aria-label="{escape(label)}" xmlns="http://www.w3.org/2000/svg">']
    for i in range(5):
        y = y_min + (y_max - y_min) * i / 4
        parts.append(f'<line class="grid" x1="{left}" y1="{py(y):.1f}" x2="{width - right}" y2="{py(y):.1f}"/>'
                     f'<text class="axis" x="{left - 6}" y="{py(y) + 4:.1f}" text-anchor="end">'
                     f'{escape(y_format.format(y))}</text>')
    for x, text in x_labels:
        parts.append(f'<text class="axis" x="{px(x):.1f}" y="{height - 10}" text-anchor="middle">{escape(text)}</text>')
    if guide is not None:
        gy, gtext = guide
        parts.append(f'<line class="guide" x1="{left}" y1="{py(gy):.1f}" x2="{width - right}" y2="{py(gy):.1f}"/>'
                     f'<text class="axis guide-label" x="{width - right}" y="{py(gy) - 4:.1f}" text-anchor="end">'
                     f'{escape(gtext)}</text>')
    for s in series:
        pts = sorted(s.points)
        if len(pts) > 1:
            d = " ".join(f"{'M' if i == 0 else 'L'} {px(x):.1f} {py(y):.1f}" for i, (x, y, _) in enumerate(pts))
            parts.append(f'<path class="line {s.cls}" d="{d}"/>')
        for x, y, tip in pts:
            parts.append(f'<circle class="dot {s.cls}" cx="{px(x):.1f}" cy="{py(y):.1f}" r="3.5">'
                         f'<title>{escape(tip)}</title></circle>')
    legend_x = left
    for s in series:
        parts.append(f'<rect class="swatch {s.cls}" x="{legend_x}" y="{height - 8}" width="10" height="3"/>'
                     f'<text class="axis legend" x="{legend_x + 14}" y="{height - 4}">{escape(s.name)}</text>')
        legend_x += 14 + 8 * len(s.name) + 16
    parts.append("</svg>")
    return Markup("".join(parts))
