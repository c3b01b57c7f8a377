"""The browser's growth chart: an inline SVG drawn here, from `growth.series`, so the page needs no script,
no chart library and nothing fetched. The same two panels as `history --plot` and `--png`."""

from __future__ import annotations

from html import escape
from typing import Any

from ..lifecycle.growth import COUNTS, TITLES, TOKENS

WIDTH, PANEL_HEIGHT = 760, 250
LEFT, RIGHT, TOP, BOTTOM = 70, 150, 30, 36  # margins: axis labels left, legend right
TICKS = 4
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf")


def growth_svg(series: dict[str, list[Any]]) -> str:
    """Both panels stacked in one <svg>; an empty string when no cycle completed yet."""
    if not series.get("cycle"):
        return ""
    panels = [
        _panel(series, lines, title, n * PANEL_HEIGHT) for n, (lines, title) in enumerate(zip((TOKENS, COUNTS), TITLES))
    ]
    height = PANEL_HEIGHT * len(panels)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" '
        f'role="img" aria-label="growth chart" font-family="sans-serif" font-size="12">' + "".join(panels) + "</svg>"
    )


def _nice_top(peak: float) -> float:
    """The axis top: a round multiple of a power of ten (1, 1.5, 2, ... 8, 10 times it), at or above `peak`."""
    if peak <= 0:
        return 1.0
    step = 10 ** (len(str(int(peak))) - 1)
    for factor in (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10):
        if factor * step >= peak:
            return float(factor * step)
    return float(10 * step)


def _label(value: float) -> str:
    return f"{value:,.0f}" if value == int(value) else f"{value:,.2f}"


def _panel(series: dict[str, list[Any]], lines: tuple[tuple[str, str], ...], title: str, y0: int) -> str:
    cycles = series["cycle"]
    plot_w, plot_h = WIDTH - LEFT - RIGHT, PANEL_HEIGHT - TOP - BOTTOM
    top = _nice_top(max((max(series[key], default=0) for key, _ in lines), default=0))

    def x(i: int) -> float:
        return LEFT + (plot_w / 2 if len(cycles) == 1 else plot_w * i / (len(cycles) - 1))

    def y(value: float) -> float:
        return y0 + TOP + plot_h * (1 - value / top)

    out = [f'<text x="{LEFT}" y="{y0 + 18}" font-weight="bold">{escape(title)}</text>']
    for t in range(TICKS + 1):
        value = top * t / TICKS
        out.append(
            f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y(value):.1f}" y2="{y(value):.1f}" stroke="#ddd"/>'
            f'<text x="{LEFT - 6}" y="{y(value) + 4:.1f}" text-anchor="end">{_label(value)}</text>'
        )
    for i, cycle in enumerate(cycles):
        out.append(f'<text x="{x(i):.1f}" y="{y0 + TOP + plot_h + 16}" text-anchor="middle">{int(cycle)}</text>')
    out.append(
        f'<text x="{LEFT + plot_w / 2:.1f}" y="{y0 + PANEL_HEIGHT - 4}" text-anchor="middle" fill="#555">'
        "compaction cycle</text>"
    )
    for n, (key, label) in enumerate(lines):
        color = COLORS[n % len(COLORS)]
        points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(series[key]))
        out.append(f'<polyline points="{points}" fill="none" stroke="{color}" stroke-width="2"/>')
        out.extend(
            f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="3.5" fill="{color}"><title>{escape(label)}: {int(v)}</title></circle>'
            for i, v in enumerate(series[key])
        )
        legend_y = y0 + TOP + 10 + 18 * n
        out.append(
            f'<rect x="{WIDTH - RIGHT + 14}" y="{legend_y - 9}" width="12" height="12" fill="{color}"/>'
            f'<text x="{WIDTH - RIGHT + 32}" y="{legend_y + 1}">{escape(label)}</text>'
        )
    return "".join(out)
