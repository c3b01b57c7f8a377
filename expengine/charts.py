"""The growth charts, one presentation for every door: `history --plot` in the terminal (plotext),
`history --png FILE` (matplotlib), and the memory browser's inline SVG, all drawing the same two
panels from `series`: raw against hot tokens per cycle, then units and what each cycle forgot,
merged, purged and refined. plotext and matplotlib are imported only when asked for (the `plots`
extra); the SVG needs nothing, so the browser's page has no script and fetches nothing.
Off a TTY the terminal chart is plain text: no colour codes, each line drawn with its own letter."""

from __future__ import annotations

from html import escape
from typing import Any

from .errors import InputError

SERIES = ("raw_tokens", "hot_tokens", "raw", "active", "units", "forgotten", "merged", "purged", "refined")
# The two panels: (series key, label) lines, and their titles.
TOKENS = (("raw_tokens", "raw tokens"), ("hot_tokens", "hot tokens"))
COUNTS = (
    ("units", "units"),
    ("forgotten", "forgotten"),
    ("merged", "merged"),
    ("purged", "purged"),
    ("refined", "refined"),
)
TITLES = ("memory per cycle: raw vs hot tokens", "knowledge units, and what each cycle did")
LETTERS = {
    "raw_tokens": "r",
    "hot_tokens": "h",
    "units": "u",
    "forgotten": "f",
    "merged": "m",
    "purged": "p",
    "refined": "n",
}


def series(runs: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Columns per completed cycle (1, 2, …) of the runs `Engine.history` gives, as the charts draw them."""
    done = [r for r in runs if r.get("status") == "completed"]
    out: dict[str, list[Any]] = {"cycle": list(range(1, len(done) + 1)), "started": [r["started"] for r in done]}
    for name in SERIES:
        key = {"active": "active_after"}.get(name, name)
        out[name] = [int(r.get(key) or 0) for r in done]
    return out


def _missing(package: str, extra: str = "plots") -> InputError:
    return InputError(
        f"{package} is not installed", hint=f"pip install 'expengine[{extra}]' (or pip install {package})"
    )


def terminal_chart(series: dict[str, list[Any]], *, width: int, color: bool) -> str:
    try:
        import plotext
    except ImportError as exc:
        raise _missing("plotext") from exc
    figure = plotext.figure
    figure.clear()
    plotext.terminal.limit(width=False, height=False)  # the caller chose the width; a chart may scroll
    figure.plot_size(width, 44)  # each panel tall enough for its legend
    figure.subplots(2, 1)
    x = series["cycle"]
    for row, (panel, title) in enumerate(zip((TOKENS, COUNTS), TITLES), start=1):
        plot = figure.subplot(row, 1)
        for key, label in panel:
            marker = "hd" if color else LETTERS[key]  # plain text: one letter per line
            plot.draw(plot.signal(x, series[key], marker=marker).label(label).lines())
        plot.title(title)
        plot.ruler("x").frequency(len(x))  # one tick per cycle
    return str(figure.build().string(colorless=not color))


def png_chart(series: dict[str, list[Any]], path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display needed: a file for reports
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise _missing("matplotlib") from exc
    fig, axes = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    x = series["cycle"]
    for ax, panel, title in zip(axes, (TOKENS, COUNTS), TITLES):
        for key, label in panel:
            ax.plot(x, series[key], marker="o", label=label)
        ax.set_title(title)
        ax.legend(loc="best")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("tokens")
    axes[1].set_ylabel("count")
    axes[1].set_xlabel("compaction cycle")
    axes[1].set_xticks(x)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    except OSError as exc:
        raise InputError(
            f"cannot write {path}: {exc.strerror}", hint="check the folder exists and is writable"
        ) from exc
    finally:
        plt.close(fig)


def weight_bars(distribution: dict[str, Any], *, width: int = 30) -> list[str]:
    """One text bar per weight bin: plain characters, readable on any terminal or in a log."""
    peak = max((b["count"] for b in distribution["bins"]), default=0) or 1
    return [
        f"{b['from']:>4.2f}–{b['to']:<5.2f} {'█' * round(width * b['count'] / peak):<{width}} {b['count']}"
        for b in distribution["bins"]
    ]


# --- the browser's SVG -------------------------------------------------------------------------
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
