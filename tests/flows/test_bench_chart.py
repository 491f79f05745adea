"""The bench's headline ratios: read from its table, saved as JSON beside it, and drawn as the chart the README
shows, with the very ratios the table gives."""

import json
from pathlib import Path

from bench import chart, report
from bench.report import Row

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
ROWS = [
    Row(
        "ingest", "jobs/s, 32 clients, median of 5 rounds", "1,900.0", "(a) 2,000.0", "0.95 x (a)", "≥ 1.0 x (a)", False
    ),
    Row(
        "ingest",
        "p50 / p95 / p99 ms, 32 clients, median of 5 rounds",
        "9 / 10 / 20",
        "(a) 9 / 30 / 40",
        "0.50 x (a) p99",
    ),
    Row(
        "end-to-end",
        "jobs/s draining 300 queued echo jobs, 1 worker, C = 32",
        "2,400.0",
        "(a) 6,000.0 · (b) 1,200.0 · Celery 2,000.0 · Dramatiq 4,800.0",
        "0.400 x (a) · 2.00 x (b) · 1.20 x Celery · 0.50 x Dramatiq",
    ),
    Row(
        "end-to-end",
        "job-worker CPU per job, ms",
        "0.30",
        "Celery 0.60 · Dramatiq 0.25",
        "0.50 x Celery · 1.20 x Dramatiq",
    ),
    Row("webhooks", "deliveries/s: 100 queued events", "900.0", "raw httpx 1,000.0", "0.90 x raw", "≥ 0.7 x raw", True),
    Row("retention", "drain jobs/s while pruning", "2,000.0", "nothing pruned 2,000.0", "1.000 x; pruning - kept 0.0"),
]
EXPECTED = {
    "ingest_32": 0.95,
    "ingest_p99_32": 0.5,
    "drain_celery": 1.2,
    "drain_dramatiq": 0.5,
    "drain_b": 2.0,
    "drain_a": 0.4,
    "cpu_celery": 0.5,
    "cpu_dramatiq": 1.2,
    "webhooks": 0.9,
}


def test_the_headline_ratios_are_the_tables_own_and_read_back_alike_from_its_markdown() -> None:
    ratios = report.headline_ratios(ROWS)
    assert {r["key"]: r["ratio"] for r in ratios} == EXPECTED  # rows the sample lacks (batch, 128 clients) left out
    assert [r["key"] for r in ratios] == [h.key for h in report.HEADLINES if h.key in EXPECTED]
    drain_a = next(r for r in ratios if r["key"] == "drain_a")
    assert drain_a["text"] == "0.400" and drain_a["ours"] == "2,400.0"  # as the table writes it
    assert next(r for r in ratios if r["key"] == "cpu_dramatiq")["better"] == "lower"
    assert report.rows_of(report.document("# a run\n\n- date: 2026-01-02T03:04:05+00:00", ROWS, ["a note"])) == ROWS


def test_the_chart_draws_the_saved_ratios_into_a_png(tmp_path: Path) -> None:
    table = tmp_path / "latest.md"
    table.write_text(report.document("# a run", ROWS, []))
    saved = report.write_ratios(ROWS, table, "2026-01-02T03:04:05+00:00")
    assert saved == tmp_path / "latest.json"
    written = json.loads(saved.read_text())
    assert written["date"] == "2026-01-02T03:04:05+00:00" and written["table"] == "latest.md"

    output = chart.draw_table(table)

    assert output == tmp_path / "ratios.png"
    assert output.read_bytes().startswith(PNG_SIGNATURE)
    plotted = chart.draw(chart.load_ratios(table), tmp_path / "again.png")
    assert plotted == [r["ratio"] for r in written["ratios"]] == list(EXPECTED.values())


def test_a_table_saved_without_its_ratios_has_them_read_from_its_rows(tmp_path: Path) -> None:
    table = tmp_path / "quick.md"
    table.write_text(report.document("# a run\n\n- date: 2026-01-02T03:04:05+00:00", ROWS, []))

    output = chart.draw_table(table)

    assert output == tmp_path / "quick-ratios.png" and output.read_bytes().startswith(PNG_SIGNATURE)
    saved = json.loads((tmp_path / "quick.json").read_text())
    assert saved["date"] == "2026-01-02T03:04:05+00:00"
    assert {r["key"]: r["ratio"] for r in saved["ratios"]} == EXPECTED


def test_the_committed_chart_and_ratios_are_those_of_the_committed_table() -> None:
    results = chart.RESULTS
    table = (results / "latest.md").read_text()
    saved = json.loads((results / "latest.json").read_text())
    assert saved["ratios"] == report.headline_ratios(report.rows_of(table))
    assert saved["date"] == report.date_of(table)
    assert (results / "ratios.png").read_bytes().startswith(PNG_SIGNATURE)
