"""The lineage graph as inline SVG, laid out in columns by depth (inputs left, derived datasets right).

Server-side and self-contained: no JavaScript library and nothing fetched from elsewhere (the api-server may have no
internet, and the page must work inside the Airflow UI's frame). Each node links to its dataset's page.
"""
from __future__ import annotations

from collections import defaultdict
from html import escape
from typing import Callable

from airflow_provider_odf.plugins.views import LineageGraph

NODE_W, NODE_H = 200, 40
COL_GAP, ROW_GAP, PAD = 70, 18, 12
MAX_LABEL = 26


def _label(name: str) -> str:
    return name if len(name) <= MAX_LABEL else name[: MAX_LABEL - 1] + "…"


def render(graph: LineageGraph, href: Callable[[str], str]) -> str:
    """``href(name)`` gives each node's link."""
    columns: dict[int, list[str]] = defaultdict(list)
    for name, d in graph.depth.items():
        columns[d].append(name)
    depths = sorted(columns)
    first = depths[0]
    rows = max(len(v) for v in columns.values())
    height = PAD * 2 + rows * NODE_H + (rows - 1) * ROW_GAP
    width = PAD * 2 + len(depths) * NODE_W + (len(depths) - 1) * COL_GAP
    pos: dict[str, tuple[float, float]] = {}
    for d in depths:
        names = sorted(columns[d], key=str.lower)
        col_h = len(names) * NODE_H + (len(names) - 1) * ROW_GAP
        y0 = (height - col_h) / 2
        x: float = PAD + (d - first) * (NODE_W + COL_GAP)
        for i, n in enumerate(names):
            pos[n] = (x, y0 + i * (NODE_H + ROW_GAP))
    out = [f'<svg class="lineage" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="lineage of {escape(graph.center)}">',
           '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
           'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#64748b"/></marker></defs>']
    for src, dst in sorted(graph.edges):
        (x1, y1), (x2, y2) = pos[src], pos[dst]
        sx, sy, ex, ey = x1 + NODE_W, y1 + NODE_H / 2, x2, y2 + NODE_H / 2
        mid = (sx + ex) / 2
        out.append(f'<path class="edge" data-from="{escape(src)}" data-to="{escape(dst)}" '
                   f'd="M {sx:.0f} {sy:.0f} C {mid:.0f} {sy:.0f}, {mid:.0f} {ey:.0f}, {ex - 2:.0f} {ey:.0f}" '
                   'fill="none" stroke="#64748b" stroke-width="1.5" marker-end="url(#arrow)"/>')
    for name, (x, y) in pos.items():
        kind = graph.kinds.get(name, "?")
        cls = "node center" if name == graph.center else "node"
        fill = "#1e40af" if name == graph.center else ("#dbeafe" if kind == "Root" else "#ede9fe")
        color = "#ffffff" if name == graph.center else "#0f172a"
        out.append(f'<a class="{cls}" href="{escape(href(name))}" data-dataset="{escape(name)}" target="_self">'
                   f'<title>{escape(name)} ({escape(kind)})</title>'
                   f'<rect x="{x:.0f}" y="{y:.0f}" width="{NODE_W}" height="{NODE_H}" rx="6" fill="{fill}" '
                   'stroke="#1e3a8a" stroke-width="1"/>'
                   f'<text x="{x + NODE_W / 2:.0f}" y="{y + NODE_H / 2 - 3:.0f}" text-anchor="middle" '
                   f'font-size="13" fill="{color}">{escape(_label(name))}</text>'
                   f'<text x="{x + NODE_W / 2:.0f}" y="{y + NODE_H / 2 + 12:.0f}" text-anchor="middle" '
                   f'font-size="10" fill="{color}" opacity="0.8">{escape(kind.lower())}</text></a>')
    out.append("</svg>")
    return "".join(out)
