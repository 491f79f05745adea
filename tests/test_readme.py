"""The README a newcomer follows: its walk-through runs as it is, its receivers are the files the tests run, and
its links and the docs' links lead somewhere."""

import asyncio
import json
import re
from pathlib import Path

from tests.live_service import live_service
from tests.support import ROOT

README = ROOT / "README.md"
DOCS = [README, ROOT / "bench" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def marked_blocks(text: str) -> dict[str, str]:
    """Every fenced code block right under an `<!-- name -->` marker, by name."""
    return dict(re.findall(r"<!-- (\S+) -->\n```\w+\n(.*?)```\n", text, re.S))


def test_the_readme_receivers_are_the_example_files() -> None:
    blocks = marked_blocks(README.read_text())
    shown = {name: code for name, code in blocks.items() if name.startswith("examples/")}
    assert sorted(shown) == ["examples/receiver.js", "examples/receiver.py"]
    for name, code in shown.items():
        assert code == (ROOT / name).read_text(), f"README.md's copy of {name} differs from the file"


def test_every_relative_link_leads_to_a_file() -> None:
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)\s]+)\)", doc.read_text()):
            if re.match(r"https?://", target) or target.startswith("#"):
                continue
            path = (doc.parent / target.split("#")[0]).resolve()
            assert path.exists(), f"{doc.relative_to(ROOT)} links to {target}, which does not exist"


async def test_the_readme_walk_through_runs_as_a_script_against_a_live_service(tmp_path: Path) -> None:
    script = marked_blocks(README.read_text())["walkthrough"]
    async with live_service(tmp_path / "api.log") as service:
        process = await asyncio.create_subprocess_exec(
            *("bash", "-e", "-o", "pipefail", "-c", script),
            env={"API": service.base_url, "KEY": service.admin_key, "PATH": "/usr/bin:/bin"},
            cwd=tmp_path,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    ready, job, trail, batch, stats, retried, replayed = [json.loads(line) for line in out.decode().splitlines()]
    assert ready["status"] == "ok"
    assert (job["status"], job["result"]) == ("succeeded", {"hello": "world"})
    assert (trail[0]["event"], trail[-1]["event"]) == ("created", "succeeded")
    assert [(item["outcome"], item["job"]["payload"]) for item in batch["items"]] == [
        ("created", {"n": 1}),
        ("created", {"n": 2}),
    ]
    assert stats["by_reason"]["permanent_error"] >= 1
    assert retried["id"] == replayed["id"]
    assert (replayed["status"], replayed["result"]) == ("succeeded", {"attempts": 2})
