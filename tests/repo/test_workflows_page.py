"""docs/workflows.md's walk-throughs run as one script, in the page's order, against a live service started as the
page says (`RATE_LIMIT_PER_MINUTE=1000`), with examples/accept_all.py as the receiver, and show what the page says."""

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from tests.live_service import live_service, printed, running_example
from tests.repo.test_readme import marked_blocks
from tests.support import ROOT, free_port, wait_for

PAGE = ROOT / "docs" / "workflows.md"
BLOCKS = ["workflow-setup", "workflow-chain", "workflow-fan", "workflow-failure", "workflow-replay", "workflow-cancel"]

# Each workflow's end as the webhook endpoint gets it: its name, the event and its seq. order-7 ends twice: failed,
# then, replayed (seq 2, no event), cancelled.
ENDS = [
    ("invoice-42", "workflow.succeeded", 1),
    ("gallery", "workflow.succeeded", 1),
    ("order-7", "workflow.failed", 1),
    ("order-7", "workflow.cancelled", 3),
    ("order-8", "workflow.succeeded", 1),
]


def test_the_page_marks_its_walk_throughs_in_order() -> None:
    assert list(marked_blocks(PAGE.read_text())) == BLOCKS


async def test_the_walk_throughs_run_as_a_script_against_a_live_service(tmp_path: Path) -> None:
    blocks = marked_blocks(PAGE.read_text())
    script = "\n".join(blocks[name] for name in BLOCKS)
    port, out = free_port(), tmp_path / "receiver.out"
    accept_all = [sys.executable, str(ROOT / "examples" / "accept_all.py")]
    async with (
        running_example(accept_all, port, out),
        live_service(tmp_path / "api.log", rate_limit_per_minute=1000) as service,
    ):
        env = {"API": service.base_url, "KEY": service.admin_key, "RECEIVER": f"http://127.0.0.1:{port}"}
        process = await asyncio.create_subprocess_exec(
            *("bash", "-e", "-o", "pipefail", "-c", script),
            env={**env, "PATH": "/usr/bin:/bin"},
            cwd=tmp_path,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        stdout, err = await process.communicate()
        assert process.returncode == 0, err.decode() + stdout.decode()
        received = await _received(out, stdout.decode())
    printed_lines = [_value(line) for line in stdout.decode().splitlines() if line]
    chain, fan, failure, replay, cancel = _split(printed_lines, [4, 2, 5, 5, 3])
    calls = [line.split(maxsplit=4) for line in received.splitlines()]
    _the_chain(chain, [json.loads(call[4]) for call in calls if call[1] == "/notify"], tmp_path)
    _the_fan(fan, tmp_path)
    _the_failure(failure)
    _the_replay(replay)
    _the_cancel(cancel)
    ends = [_end(json.loads(call[4])) for call in calls if call[1] == "/hook"]
    assert set(ends) - {("nightly", "workflow.cancelled", 1)} == set(ENDS)  # the last may follow the endpoint's delete


async def _received(out: Path, script_output: str) -> str:
    """What the receiver printed, once it has every end of ENDS; failing, what it and the script printed."""
    try:
        text = await wait_for(lambda: _printed(out, ENDS), within=20)
    except AssertionError:
        shown = await asyncio.to_thread(out.read_text)
        raise AssertionError(f"{shown[-6000:]}\n{script_output}") from None
    assert text is not None
    return text


def _value(line: str) -> Any:
    """A line the script printed: a JSON answer, or a field `get` printed as it is (a status, a URL)."""
    try:
        return json.loads(line)
    except json.JSONDecodeError:
        return line


def _split(lines: list[Any], sizes: list[int]) -> list[list[Any]]:
    assert len(lines) == sum(sizes), lines
    starts = [sum(sizes[:n]) for n in range(len(sizes))]
    return [lines[start : start + size] for start, size in zip(starts, sizes, strict=True)]


def _end(event: dict[str, Any]) -> tuple[str, str, int]:
    return event["data"]["workflow"]["name"], event["type"], event["seq"]


async def _printed(out: Path, ends: list[tuple[str, str, int]]) -> str | None:
    """What the receiver printed, once it has printed every one of `ends`."""
    text = await printed(out, "workflow.")
    if text is None:
        return None
    found = {
        _end(json.loads(call[4]))
        for call in (line.split(maxsplit=4) for line in text.splitlines())
        if call[1] == "/hook"
    }
    return text if set(ends) <= found else None


def _the_chain(lines: list[Any], notified: list[dict[str, Any]], folder: Path) -> None:
    created, ended, trail, artifact_url = lines
    assert created["status"] == "running"
    assert created["jobs"]["render"] in ("pending", "queued")
    assert (created["jobs"]["thumb"], created["jobs"]["notify"]) == ("waiting", "waiting")
    every = dict.fromkeys(created["jobs"], "succeeded")
    assert ended == {"status": "succeeded", "counts": {"succeeded": 3}, "jobs": every}
    assert trail == ["created", "waiting", "pending", "queued", "running", "succeeded"]
    assert artifact_url.endswith("/artifact")
    assert (folder / "invoice-42.pdf").read_bytes().startswith(b"%PDF")
    [body] = notified
    assert body["invoice"] == 42
    assert body["dependencies"]["render"]["artifact_url"] == artifact_url
    assert (body["dependencies"]["thumb"]["format"], body["dependencies"]["thumb"]["width"]) == ("PNG", 64)


def _the_fan(lines: list[Any], folder: Path) -> None:
    ended, result = lines
    assert ended == {"status": "succeeded", "counts": {"succeeded": 101}, "jobs": "…"}
    assert result["pages"] >= 1 and result["artifact_url"].endswith("/artifact")
    assert (folder / "gallery.pdf").read_bytes().startswith(b"%PDF")


def _the_failure(lines: list[Any]) -> None:
    failed, detail, replayed, status, ended = lines
    assert failed == {
        "status": "failed",
        "counts": {"dead_lettered": 1, "cancelled": 1},
        "jobs": {"charge": "dead_lettered", "receipt": "cancelled"},
    }
    assert (detail["from"], detail["to"], detail["reason"]) == ("waiting", "cancelled", "dependency_failed")
    assert replayed["replayed"] == 1
    assert status in ("running", "cancelled")
    assert ended == {
        "status": "cancelled",
        "counts": {"succeeded": 1, "cancelled": 1},
        "jobs": {"charge": "succeeded", "receipt": "cancelled"},
    }


def _the_replay(lines: list[Any]) -> None:
    dead, waiting, queued, ended, trail = lines
    assert (dead, waiting, queued) == ("dead_lettered", "waiting", "queued")
    assert ended == {
        "status": "succeeded",
        "counts": {"succeeded": 3},
        "jobs": dict.fromkeys(ended["jobs"], "succeeded"),
    }
    assert trail == ["created", "waiting", "pending", "queued", "running", "succeeded"]


def _the_cancel(lines: list[Any]) -> None:
    answer, ended, listed = lines
    assert answer["status"] == "running"
    assert answer["jobs"] == {"export": "running", "compress": "cancelled", "upload": "cancelled"}
    assert ended["status"] == "cancelled"
    assert ended["jobs"] == {"export": "cancelled", "compress": "cancelled", "upload": "cancelled"}  # stopped
    assert [(w["name"], w["status"], w["jobs"]) for w in listed] == [("nightly", "cancelled", [])]
