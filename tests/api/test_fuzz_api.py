"""schemathesis against the service's own /openapi.json, with an admin key and with a client key: no server error,
every answer in its documented status codes, content type, headers and schema, schema-violating requests refused
and schema-valid ones taken, for every operation (the live streams aside: they never end). The run's settings are
in tests/schemathesis.toml.

The coverage phase (every boundary of every schema, some six thousand requests) runs once, with the admin key: its
cases do not depend on the key. The client key runs the phases whose answers do (403s, another client's 404s)."""

import asyncio
import re
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest

from tests.conftest import ADMIN_KEY, make_settings, settings_env, world_of_its_own
from tests.support import ROOT, app_process, env_without_dotenv, free_port, until_serving

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

EXAMPLES = 8  # per operation and phase: a bounded run that still reaches every operation
SEED = 20261201
ALL_PHASES = "examples,coverage,fuzzing,stateful"
KEYED_PHASES = "examples,fuzzing,stateful"


@pytest.mark.parametrize("admin", [True, False], ids=["admin", "client"])
async def test_every_operation_answers_as_its_schema_says(admin: bool, tmp_path: Path) -> None:
    port = free_port()
    # No worker: nothing generated is run (a generated URL is never called), and circuits stay closed. Its own
    # database and namespace: no other test's worker, relay or scheduler ever takes a generated job.
    async with world_of_its_own("fuzz") as world:
        settings = make_settings(port=port, embedded_workers=False, breaker_min_calls=1_000_000, **world)
        env = env_without_dotenv(settings_env(settings))
        await _fuzz(env, tmp_path, admin)


async def _fuzz(env: dict[str, str], tmp_path: Path, admin: bool) -> None:
    port = int(env["PORT"])
    with app_process(["api"], env, tmp_path / "api.log", module="tests.offline_app") as service:
        base = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(base_url=base, timeout=10) as http:
            await until_serving(http)
            key = ADMIN_KEY if admin else await _client_key(http)
        command = [
            str(Path(sys.executable).parent / "schemathesis"),
            "--config-file",
            str(ROOT / "tests" / "schemathesis.toml"),
            "run",
            f"{base}/openapi.json",
            "--header",
            f"Authorization: Bearer {key}",
            "--checks",
            "all",
            "--max-examples",
            str(EXAMPLES),
            "--seed",
            str(SEED),
            "--exclude-path-regex",
            ".*/stream$",
            "--request-timeout",
            "20",
            "--no-color",
            "--phases",
            ALL_PHASES if admin else KEYED_PHASES,
        ]
        run = await asyncio.to_thread(
            subprocess.run, command, cwd=tmp_path, capture_output=True, text=True, timeout=600
        )
        report = run.stdout[-12000:]
        assert run.returncode == 0, report
        selected = re.search(r"Selected: (\d+)/", report)
        assert selected and f"Tested: {selected.group(1)}" in report, report  # every selected operation was reached
        generated = re.search(r"(\d+) generated, (\d+) passed", report)
        assert generated and generated.group(1) == generated.group(2), report
        assert service.popen.poll() is None, service.output()


async def _client_key(http: httpx.AsyncClient) -> str:
    client = {"client_id": "fuzz-" + uuid.uuid4().hex[:8]}
    made = await http.post("/api/v1/api-keys", json=client, headers={"Authorization": f"Bearer {ADMIN_KEY}"})
    key: str = made.json()["api_key"]
    return key
