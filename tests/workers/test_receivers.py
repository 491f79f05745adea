"""The receivers in examples/, in Python and in Node (each on the Standard Webhooks library of its own ecosystem) and
in Go (on its standard library: the Go package does not install here, its module proxy unreachable), verify our
real deliveries unchanged, and refuse one signed with another secret."""

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from app.core.signing import new_secret, signed_headers
from app.workers.jobs.worker import JobWorker
from app.workers.webhooks.worker import WebhookWorker
from tests.live_service import printed, running_example
from tests.support import ROOT, Api, free_port, wait_for

RECEIVERS = {
    "python": [sys.executable, str(ROOT / "examples" / "receiver.py")],
    "node": ["node", str(ROOT / "examples" / "receiver.js")],
    "go": [],  # built first (go_receiver)
}


def go_receiver(folder: Path) -> list[str]:
    """examples/receiver-go built into `folder`, as `go build` makes it: the command that runs it."""
    binary = folder / "receiver-go"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(folder), "GOCACHE": str(folder / "gocache")}
    subprocess.run(["go", "build", "-o", str(binary), "."], cwd=ROOT / "examples" / "receiver-go", env=env, check=True)
    return [str(binary)]


@pytest.mark.parametrize("kind", sorted(RECEIVERS))
async def test_the_example_receiver_verifies_a_real_delivery(
    kind: str, api: Api, worker: JobWorker, webhook_worker: WebhookWorker, tmp_path: Path
) -> None:
    port = free_port()
    headers = await api.new_client(f"receiver-{kind}")
    url = f"http://127.0.0.1:{port}/hook"
    endpoint = (await api.client.post("/api/v1/webhooks", json={"url": url}, headers=headers)).json()
    out = tmp_path / "receiver.out"
    command = RECEIVERS[kind] or await asyncio.to_thread(go_receiver, tmp_path)
    async with running_example(command, port, out, WEBHOOK_SECRET=endpoint["secret"]):
        job = (await api.submit(headers)).json()
        text = await wait_for(lambda: printed(out, "job.succeeded"), within=20)
        forged = await _forged_delivery(url)
        rejected = await wait_for(lambda: printed(out, "REJECTED"), within=10)
    line = next(line for line in text.splitlines() if "job.succeeded" in line)
    logs = await wait_for(lambda: _settled(api, headers, job["id"]), within=20)
    assert line == f"verified {logs[0]['id']} job.succeeded"
    assert [d["status"] for d in logs] == ["succeeded"]
    assert forged == 400
    assert "REJECTED msg_forged job.succeeded" in rejected


async def _forged_delivery(url: str) -> int:
    """A delivery as we send it, signed with a secret the receiver does not hold."""
    body = json.dumps({"id": "evt_forged", "type": "job.succeeded", "seq": 1, "data": {}}).encode()
    forged = signed_headers([new_secret()], "msg_forged", int(time.time()), body, None)
    async with httpx.AsyncClient(timeout=10) as client:
        return (await client.post(url, content=body, headers=forged)).status_code


async def _settled(api: Api, headers: dict[str, str], job_id: str) -> list[dict[str, str]] | None:
    # The receiver prints before the worker has recorded its answer: wait for the delivery to settle.
    logs: list[dict[str, str]] = (await api.client.get(f"/api/v1/jobs/{job_id}/logs", headers=headers)).json()
    return logs if logs and all(d["status"] != "pending" for d in logs) else None
