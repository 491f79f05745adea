"""`python -m bench.chart [TABLE]`: draw the headline ratios of a bench run as a horizontal bar chart.

TABLE is a results table the bench wrote (default `bench/results/latest.md`). The ratios are read from the JSON the
bench saved beside it (`latest.json`); a table written before the bench saved them has them read from its rows and
saved there first. The chart goes to `bench/results/ratios.png` for `latest.md`, `<name>-ratios.png` beside any
other table. `python -m bench` draws it after writing its table.

One bar per ratio (ours / the baseline's, as the table writes it), a line at 1.0 where ours equals the baseline's;
a bar is green on the side of 1.0 that is ours to want (more throughput, less CPU or latency), orange on the other.
"""

import argparse
import json
import sys
from pathlib import Path

from bench.env import ROOT
from bench.report import date_of, ratios_path, rows_of, write_ratios

RESULTS = ROOT / "bench" / "results"
GOOD, BAD, EVEN = "#2e8b57", "#e07b24", "#444444"


def chart_path(table: Path) -> Path:
    """`latest.md` -> `ratios.png` beside it (the chart the README shows); `quick.md` -> `quick-ratios.png`."""
    return table.with_name("ratios.png" if table.name == "latest.md" else f"{table.stem}-ratios.png")


def load_ratios(table: Path) -> dict[str, object]:
    """The saved headline ratios of `table`, saved first from its rows when the bench did not save them."""
    path = ratios_path(table)
    if not path.exists():
        text = table.read_text()
        write_ratios(rows_of(text), table, date_of(text))
    loaded: dict[str, object] = json.loads(path.read_text())
    return loaded


def draw(results: dict[str, object], output: Path) -> list[float]:
    """Draw `results` (what `load_ratios` returns) as a PNG at `output`; returns the ratios plotted, top to bottom."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    ratios = results["ratios"]
    assert isinstance(ratios, list)
    labels = [f"{r['label']}, lower is better" if r["better"] == "lower" else str(r["label"]) for r in ratios]
    values = [float(r["ratio"]) for r in ratios]
    colours = [_colour(float(r["ratio"]), str(r["better"])) for r in ratios]

    figure = Figure(figsize=(9, 0.42 * len(ratios) + 1.4), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots()
    bars = axes.barh(range(len(values)), values, color=colours, height=0.6)
    axes.set_yticks(range(len(values)), labels, fontsize=9)
    axes.invert_yaxis()  # the first ratio on top
    axes.axvline(1.0, color=EVEN, linewidth=1.2, linestyle="--")
    for bar, ratio in zip(bars, ratios, strict=True):
        axes.annotate(
            f" {ratio['text']} x",
            (bar.get_width(), bar.get_y() + bar.get_height() / 2),
            va="center",
            fontsize=8,
            bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.5, "alpha": 0.8},
        )
    axes.set_xlim(0, max([1.0, *values]) * 1.15)
    axes.set_xlabel("ours ÷ baseline (1.0: the same)")
    axes.set_title(f"taskq beside its baselines: {results.get('table', '')} of {str(results.get('date', ''))[:10]}")
    axes.legend(
        handles=[Patch(color=GOOD, label="ours the better"), Patch(color=BAD, label="the baseline the better")],
        loc="lower right",
        fontsize=8,
    )
    axes.spines[["top", "right"]].set_visible(False)
    output.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(output, format="png", dpi=110, metadata={"Software": None})
    return [float(bar.get_width()) for bar in bars]


def _colour(ratio: float, better: str) -> str:
    if ratio == 1.0:
        return EVEN
    return GOOD if (ratio > 1.0) == (better == "higher") else BAD


def draw_table(table: Path) -> Path:
    """Draw the chart of a results table; returns where it went."""
    output = chart_path(table)
    draw(load_ratios(table), output)
    return output


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.chart", description="Draw a bench run's headline ratios.")
    parser.add_argument("table", nargs="?", type=Path, default=RESULTS / "latest.md", help="a results table")
    args = parser.parse_args(argv)
    print(f"bench: chart written to {draw_table(args.table)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
