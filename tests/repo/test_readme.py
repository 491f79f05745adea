"""The README a newcomer follows: its walk-through runs as it is, it stays a front page, the receivers the webhooks
page shows are the files the tests run, and its links and the docs' links lead somewhere."""

import asyncio
import json
import re
import sys
from pathlib import Path

from tests.conftest import world_of_its_own
from tests.live_service import Service, live_service
from tests.support import ROOT

README = ROOT / "README.md"
WEBHOOKS_PAGE = ROOT / "docs" / "webhooks.md"
DOCS = [README, ROOT / "bench" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def marked_blocks(text: str) -> dict[str, str]:
    """Every fenced code block right under an `<!-- name -->` marker, by name."""
    return dict(re.findall(r"<!-- (\S+) -->\n```\w+\n(.*?)```\n", text, re.S))


def test_the_receivers_shown_are_the_example_files() -> None:
    blocks = marked_blocks(WEBHOOKS_PAGE.read_text())
    shown = {name: code for name, code in blocks.items() if name.startswith("examples/")}
    assert sorted(shown) == ["examples/receiver.js", "examples/receiver.py"]
    for name, code in shown.items():
        assert code == (ROOT / name).read_text(), f"docs/webhooks.md's copy of {name} differs from the file"
    assert "examples/receiver.py" in README.read_text()  # the README sends a newcomer to them


def test_the_readme_is_a_front_page_that_names_the_two_commands() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 150
    first_block = re.search(r"```sh\n(.*?)```", text, re.S)
    assert first_block is not None
    assert [line.split()[:2] for line in first_block.group(1).splitlines()] == [["make", "run"], ["make", "test"]]
    assert "](bench/results/ratios.png)" in text  # the performance chart, drawn by make bench


def anchors(page: Path) -> set[str]:
    """The anchors of a page's headings, as GitHub makes them: lower case, punctuation dropped, spaces to hyphens."""
    prose = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)
    headings = re.findall(r"^#{1,6} (.+)$", prose, re.M)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}


def test_every_relative_link_leads_to_a_file() -> None:
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)\s]+)\)", doc.read_text()):
            if re.match(r"https?://", target):
                continue
            file, _, anchor = target.partition("#")
            path = (doc.parent / file).resolve() if file else doc
            assert path.exists(), f"{doc.relative_to(ROOT)} links to {target}, which does not exist"
            if anchor and path.suffix == ".md":
                assert anchor in anchors(path), f"{doc.relative_to(ROOT)} links to {target}: no such heading"


async def walk(service: Service, folder: Path, *command: str) -> str:
    """What a walk-through printed, run in `folder` with `API` and `KEY` set for `service` (it must succeed)."""
    env = {"API": service.base_url, "KEY": service.admin_key, "PATH": "/usr/bin:/bin"}
    pipe = asyncio.subprocess.PIPE
    process = await asyncio.create_subprocess_exec(*command, env=env, cwd=folder, stdout=pipe, stderr=pipe)
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    return out.decode()


async def test_the_readme_walk_through_runs_as_a_script_against_a_live_service(tmp_path: Path) -> None:
    script = marked_blocks(README.read_text())["walkthrough"]
    async with live_service(tmp_path / "api.log") as service:
        out = await walk(service, tmp_path, "bash", "-e", "-o", "pipefail", "-c", script)
    ready, job, trail, batch, stats, retried, replayed = [json.loads(line) for line in out.splitlines()]
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


async def test_the_readme_python_walk_through_runs_against_a_live_service(tmp_path: Path) -> None:
    script = tmp_path / "walk.py"
    script.write_text(marked_blocks(README.read_text())["walkthrough-python"])
    async with (  # a database of its own: the DLQ's counts are every client's to the admin key
        world_of_its_own("readme-py") as world,
        live_service(tmp_path / "api.log", **world) as service,
    ):
        out = await walk(service, tmp_path, sys.executable, str(script))
    assert out.splitlines() == [
        "succeeded {'hello': 'world'} ['created', 'queued', 'running', 'succeeded']",
        "dead_lettered {'permanent_error': 1}",
        "succeeded",
    ]
