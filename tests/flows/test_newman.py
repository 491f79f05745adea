"""The Postman collection, run by newman against a live service, passes every one of its own assertions."""

import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.live_service import NODE_MODULES, live_service, printed, running_example
from tests.repo.test_postman import load_collection, requests
from tests.support import ROOT, free_port, wait_for

NEWMAN = NODE_MODULES / "newman" / "bin" / "newman.js"
ASSERTIONS = 316  # every pm.test in the collection runs once: polling requests assert only on their last answer
SKIPPED = {"Events live (SSE)"}  # a stream that never ends by itself: the run skips it, its description says so


async def run_newman(base_url: str, admin_key: str, receiver_url: str, report: Path) -> dict[str, Any]:
    """newman over the whole collection; its JSON report's `run`."""
    process = await asyncio.create_subprocess_exec(
        "node",
        str(NEWMAN),
        "run",
        str(ROOT / "postman_collection.json"),
        *("--env-var", f"base_url={base_url}"),
        *("--env-var", f"admin_key={admin_key}"),
        *("--env-var", f"receiver_url={receiver_url}"),
        *("--timeout-request", "30000"),
        *("--reporters", "cli,json", "--reporter-json-export", str(report)),
        *("--color", "off"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await process.communicate()
    return read_report(report, output.decode(errors="replace"))


def read_report(report: Path, cli: str) -> dict[str, Any]:
    assert report.exists(), cli
    run: dict[str, Any] = json.loads(report.read_text())["run"]
    run["cli"] = cli
    return run


@pytest.mark.slow
async def test_newman_runs_the_whole_collection_against_a_live_service_and_every_assertion_passes(
    tmp_path: Path,
) -> None:
    port, out = free_port(), tmp_path / "receiver.out"
    accept_all = [sys.executable, str(ROOT / "examples" / "accept_all.py")]
    async with (
        running_example(accept_all, port, out),
        live_service(tmp_path / "api.log", rate_limit_per_minute=100, worker_heartbeat_seconds=0.5) as service,
    ):
        run = await run_newman(service.base_url, service.admin_key, f"http://127.0.0.1:{port}", tmp_path / "run.json")
        received = await wait_for(lambda: printed(out, "job.succeeded"), within=10)
    failures = [(f["source"].get("name"), f["error"]["message"]) for f in run["failures"]]
    assert failures == [], run["cli"][-4000:]
    assert run["stats"]["assertions"] == {"total": ASSERTIONS, "pending": 0, "failed": 0}
    executed = {execution["item"]["name"] for execution in run["executions"]}
    assert executed == {item["name"] for item in requests(load_collection()["item"])} - SKIPPED
    # The collection's notification job and its webhook deliveries really reached the receiver.
    lines = [line.split() for line in received.splitlines()]
    assert [line[1] for line in lines if line[1] == "/notify"] == ["/notify"]
    hook_events = [line[3] for line in lines if line[1] == "/hook"]
    assert hook_events.count("webhook.test") == 2  # sent, then redelivered
    assert "job.succeeded" in hook_events


def test_the_node_tools_are_pinned_and_the_lock_names_no_download_address() -> None:
    package = json.loads((ROOT / "tests" / "package.json").read_text())
    lock = json.loads((ROOT / "tests" / "package-lock.json").read_text())
    assert all(re.fullmatch(r"\d+\.\d+\.\d+", version) for version in package["dependencies"].values())
    assert lock["packages"][""]["dependencies"] == package["dependencies"]
    entries = [entry for name, entry in lock["packages"].items() if name]
    assert len(entries) > 100 and all("integrity" in entry and "resolved" not in entry for entry in entries)
