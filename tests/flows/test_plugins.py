"""The example plugin (examples/wordcount-plugin) as docs/plugins.md installs it: into a virtual environment of its
own beside the service's packages, then the API and a job worker started from it. Its type is in OpenAPI and in
the job types' list, and its job, held meanwhile by a job worker without the plugin (this process's), runs to its
result once the plugin's worker starts."""

import re
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.workers.jobs.worker import JobWorker
from tests.conftest import ADMIN_KEY, make_settings, settings_env
from tests.support import ROOT, app_process, free_port, until_serving, wait_for

EXAMPLE = ROOT / "examples" / "wordcount-plugin"
MODULE = "src/taskq_wordcount/__init__.py"
TEXT = "To be, or not to be: that is the question. To sleep, perchance to dream."


def test_the_plugin_page_shows_the_example_module_as_it_is() -> None:
    page = (ROOT / "docs" / "plugins.md").read_text()
    shown = re.search(r"<!-- examples/wordcount-plugin/(\S+) -->\n```python\n(.*?)```\n", page, re.S)
    assert shown is not None and shown.group(1) == MODULE
    assert shown.group(2) == (EXAMPLE / MODULE).read_text()


@pytest.fixture(scope="module")
def plugin_python(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The python of a new virtual environment that sees the service's packages (a .pth file naming them) and has
    the example plugin installed from a copy of its folder, by pip as a user runs it."""
    root = tmp_path_factory.mktemp("plugin-venv")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    python = str(venv / "bin" / "python")
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], check=True, capture_output=True
    )
    Path(purelib.stdout.decode().strip(), "taskq_service.pth").write_text(sysconfig.get_path("purelib") + "\n")
    source = shutil.copytree(EXAMPLE, root / "wordcount-plugin")
    installed = subprocess.run([python, "-m", "pip", "install", "-q", str(source)], capture_output=True, text=True)
    assert installed.returncode == 0, installed.stderr
    yield python


@pytest.fixture
async def plugin_api(plugin_python: str, tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    """The API alone (no embedded workers), started from the plugin's environment."""
    settings = make_settings(port=free_port())
    log = tmp_path / "api.log"
    with app_process(["api"], settings_env(settings), log, python=plugin_python) as process:
        base_url = f"http://127.0.0.1:{settings.port}"
        async with httpx.AsyncClient(base_url=base_url, timeout=15) as client:
            await until_serving(client)
            assert process.popen.poll() is None, process.output()
            yield client


def admin() -> dict[str, str]:
    return {"Authorization": f"Bearer {ADMIN_KEY}"}


async def job_of(client: httpx.AsyncClient, job_id: str, wait: float | None = None) -> dict[str, Any]:
    answer = await client.get(f"/api/v1/jobs/{job_id}", params={"wait": wait} if wait else {}, headers=admin())
    assert answer.status_code == 200, answer.text
    job: dict[str, Any] = answer.json()
    return job


@pytest.mark.slow
async def test_the_example_plugin_installed_in_a_venv_runs_its_job_end_to_end(
    plugin_python: str, plugin_api: httpx.AsyncClient, worker: JobWorker, tmp_path: Path
) -> None:
    schemas = (await plugin_api.get("/openapi.json")).json()["components"]["schemas"]
    assert schemas["WordCountPayload"]["required"] == ["text"]
    assert {"$ref": "#/components/schemas/WordcountJobRequest"} in schemas["JobRequest"]["oneOf"]
    types = {t["name"]: t for t in (await plugin_api.get("/api/v1/job-types", headers=admin())).json()["items"]}
    assert types["wordcount"]["description"] == "Counts the words of a text."
    assert set(types["wordcount"]["payload_schema"]["properties"]) == {"text", "top"}
    refused = await plugin_api.post("/api/v1/jobs", json={"job_type": "wordcount", "payload": {}}, headers=admin())
    assert refused.status_code == 422 and refused.json()["errors"][0]["loc"] == ["body", "payload", "text"]

    # This process's job worker has no such type: it holds the job in the database rather than failing it.
    body = {"job_type": "wordcount", "payload": {"text": TEXT, "top": 2}}
    job = (await plugin_api.post("/api/v1/jobs", json=body, headers=admin())).json()

    async def held() -> dict[str, Any] | None:
        events = (await plugin_api.get(f"/api/v1/jobs/{job['id']}/events", headers=admin())).json()
        return next((e for e in events if e["event"] == "held"), None)

    hold = await wait_for(held, within=15)
    assert hold["detail"]["reason"] == "unknown_type" and "no handler for its type" in hold["detail"]["note"]
    assert (await job_of(plugin_api, job["id"]))["status"] == "queued"

    # A job worker with the plugin releases it at its start and runs it.
    settings_of_worker = settings_env(make_settings())
    with app_process(["worker", "jobs"], settings_of_worker, tmp_path / "worker.log", python=plugin_python) as ran:
        done = await wait_for(lambda: _finished(plugin_api, job["id"]), within=30)
        assert ran.popen.poll() is None, ran.output()
    assert done["status"] == "succeeded", done
    assert done["result"] == {
        "words": 15,
        "top": [{"word": "to", "count": 4}, {"word": "be", "count": 2}],
        "job_id": job["id"],
    }
    assert "dead_lettered" not in [e["event"] for e in await trail_of(plugin_api, job["id"])]


async def _finished(client: httpx.AsyncClient, job_id: str) -> dict[str, Any] | None:
    job = await job_of(client, job_id, wait=2)
    return job if job["status"] in ("succeeded", "dead_lettered", "cancelled") else None


async def trail_of(client: httpx.AsyncClient, job_id: str) -> list[dict[str, Any]]:
    answer = await client.get(f"/api/v1/jobs/{job_id}/events", headers=admin())
    assert answer.status_code == 200
    events: list[dict[str, Any]] = answer.json()
    return events
