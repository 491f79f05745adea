"""The receiver script the README shows really verifies our deliveries."""

import asyncio
import re
import sys
from pathlib import Path

from app.workers.job_worker import JobWorker
from app.workers.webhook_worker import WebhookWorker
from tests.support import ROOT, Api, free_port, wait_for


def readme_receiver() -> str:
    readme = (ROOT / "README.md").read_text()
    match = re.search(r"<!-- receiver-script -->\n```python\n(.*?)```", readme, re.S)
    assert match, "README.md has no receiver script"
    return match.group(1)


async def test_the_readme_receiver_verifies_a_real_delivery(
    api: Api, worker: JobWorker, webhook_worker: WebhookWorker, tmp_path: Path
) -> None:
    script = tmp_path / "receiver.py"
    script.write_text(readme_receiver())
    port = free_port()
    headers = await api.new_client("readme")
    url = f"http://127.0.0.1:{port}/hook"
    endpoint = (await api.client.post("/api/v1/webhooks", json={"url": url}, headers=headers)).json()
    out = tmp_path / "receiver.out"
    env = {"WEBHOOK_SECRET": endpoint["secret"], "PORT": str(port), "PATH": "/usr/bin:/bin"}
    with out.open("wb") as sink:
        process = await asyncio.create_subprocess_exec(
            sys.executable, str(script), env=env, stdout=sink, stderr=asyncio.subprocess.STDOUT
        )
    try:
        await wait_for(lambda: _listening(port), within=20)  # bound before the first delivery goes out
        job = (await api.submit(headers)).json()

        async def printed() -> str | None:
            text = out.read_text()
            return text if "job.succeeded" in text else None

        text = await wait_for(printed, within=20)
    finally:
        process.kill()
        await process.wait()
    assert text is not None
    line = next(line for line in text.splitlines() if "job.succeeded" in line)
    assert line.startswith("verified msg_")

    async def recorded() -> list[str] | None:
        # The receiver prints before the worker has recorded its answer: wait for the delivery to settle.
        logs = (await api.client.get(f"/api/v1/jobs/{job['id']}/logs", headers=headers)).json()
        statuses = [d["status"] for d in logs]
        return statuses if statuses and "pending" not in statuses else None

    assert await wait_for(recorded, within=20) == ["succeeded"]


async def _listening(port: int) -> bool:
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return False
    writer.close()
    await writer.wait_closed()
    return True
