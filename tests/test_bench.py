"""The benchmark runs end to end in its quick mode and produces its table (its figures are not checked)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT

SCENARIOS = ("ingest", "end-to-end", "webhooks", "soak")
HEADER = "| scenario | figure | ours | baseline | ratio | target | met? |"


@pytest.mark.slow
@pytest.mark.timeout(330)
def test_quick_bench_writes_a_table_with_every_scenario(tmp_path: Path) -> None:
    output = tmp_path / "bench.md"
    result = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--output", str(output)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    text = output.read_text()
    assert HEADER in text
    table = [line for line in text.splitlines() if line.startswith("| ")]
    for scenario in SCENARIOS:
        rows = [line for line in table if re.match(rf"\| {re.escape(scenario)} \|", line)]
        assert rows, f"no row for {scenario} in:\n{text}"
        assert not any("scenario failed" in row for row in rows), rows
    assert text in result.stdout  # printed as well as written
