"""The job types' payload specs: each handler is paired with the spec the API checks, and the API's side (schemas,
models, routes) validates a payload without loading the workers, the handlers or their PDF and image libraries."""

import json
import subprocess
import sys

from app.handlers.registry import JOB_TYPES
from app.schemas.payloads.registry import PAYLOADS
from tests.support import ROOT

API_SIDE = ("app/schemas", "app/models", "app/api")
NOT_ON_API_SIDE = ("PIL", "reportlab", "app.workers", "app.handlers")

# Imports the modules one by one in a fresh interpreter and names the first that loads something it should not.
CHECK = """
import importlib, json, sys
found = {}
for name in MODULES:
    importlib.import_module(name)
    loaded = sorted(m for m in sys.modules if any(m == f or m.startswith(f + ".") for f in FORBIDDEN))
    if loaded:
        found = {name: loaded}
        break
print(json.dumps(found))
"""


def api_side_modules() -> list[str]:
    paths = sorted(path for layer in API_SIDE for path in (ROOT / layer).rglob("*.py"))
    names = [".".join(path.relative_to(ROOT).with_suffix("").parts) for path in paths]
    return [name.removesuffix(".__init__") for name in names]


def test_every_job_type_runs_what_the_api_accepts() -> None:
    assert list(JOB_TYPES) == list(PAYLOADS)
    assert [job_type.spec for job_type in JOB_TYPES.values()] == list(PAYLOADS.values())


def test_the_api_side_loads_neither_workers_nor_handlers_nor_their_libraries() -> None:
    modules = api_side_modules()
    assert {"app.schemas.job", "app.schemas.payloads.document", "app.models.rows", "app.api.routes.jobs"} <= {*modules}
    script = f"MODULES = {modules!r}\nFORBIDDEN = {NOT_ON_API_SIDE!r}\n{CHECK}"
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == {}
