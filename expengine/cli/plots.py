"""Growth charts: `history --plot` in the terminal (plotext) and `--png FILE` (matplotlib), both lazy.

Both draw the same two panels from `growth.series`: raw against hot tokens per cycle, then units and
what each cycle forgot, merged, purged and refined. Off a TTY the terminal chart is plain text: no
colour codes, and each line drawn with its own letter so it reads in a log file.
"""

from __future__ import annotations

from typing import Any

from ..errors import InputError
from ..lifecycle.growth import COUNTS, TITLES, TOKENS

LETTERS = {
    "raw_tokens": "r",
    "hot_tokens": "h",
    "units": "u",
    "forgotten": "f",
    "merged": "m",
    "purged": "p",
    "refined": "n",
}


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
