"""Generate the client's models and operations from the service's OpenAPI document.

Run from the repository's root with the service's environment: `.venv/bin/python clients/python/generate.py`. It
writes `openapi.json` (the document the client was made from), `taskq_client/models.py` (pydantic models, by
datamodel-code-generator) and `taskq_client/_operations.py` (one typed method per operation, sync and async, by
this script). tests/clients/test_python_client.py generates again into a temporary folder and compares, so the
client is always in step with the API. `--into DIR` writes there instead.
"""

import argparse
import json
import keyword
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
STREAMS = {"events_stream", "job_stream"}  # Server-Sent Events: the client's own iterators (taskq_client/sse.py)
TEXT = {"read_metrics"}  # Prometheus text
BINARY = {"job_artifact"}  # a file
SCALARS = {"integer": "int", "number": "float", "string": "str", "boolean": "bool"}


def document() -> dict[str, Any]:
    """The service's OpenAPI document, as the API serves it."""
    sys.path.insert(0, str(ROOT))
    from app.core.config import Settings
    from app.main import create_app

    schema: dict[str, Any] = create_app(Settings(_env_file=None)).openapi()  # type: ignore[call-arg]
    return schema


def models(openapi: Path, into: Path) -> None:
    """taskq_client/models.py from the document's components, by datamodel-code-generator."""
    command = [
        str(Path(sys.executable).parent / "datamodel-codegen"),
        *("--input", str(openapi), "--input-file-type", "openapi", "--output", str(into)),
        *("--output-model-type", "pydantic_v2.BaseModel", "--target-python-version", "3.10"),
        *("--disable-timestamp", "--use-standard-collections", "--use-union-operator", "--field-constraints"),
        *("--use-double-quotes", "--use-schema-description", "--formatters", "ruff-check"),
        *("--set-default-enum-member", "--collapse-root-models", "--use-annotated"),
        *("--custom-file-header", '"""The API\'s models, generated from its OpenAPI document by generate.py."""'),
    ]
    subprocess.run(command, check=True, capture_output=True)


def python_type(schema: dict[str, Any]) -> str:
    """A parameter's Python type, from its schema."""
    if "anyOf" in schema:
        options = [python_type(option) for option in schema["anyOf"]]
        return " | ".join(dict.fromkeys(options))
    if "$ref" in schema:
        return "str"  # an enum of strings: the value is sent as it is
    kind = schema.get("type")
    if kind == "array":
        return f"list[{python_type(schema.get('items', {}))}]"
    if kind == "null":
        return "None"
    return SCALARS.get(kind or "", "Any")


def model_of(schema: dict[str, Any]) -> str:
    """The Python type an answer is read into."""
    if "$ref" in schema:
        return "models." + schema["$ref"].rsplit("/", 1)[-1]
    if schema.get("type") == "array":
        return f"list[{model_of(schema['items'])}]"
    return "Any"


def identifier(name: str) -> str:
    name = re.sub(r"\W", "_", name.lower())
    return name + "_" if keyword.iskeyword(name) else name


def operation(path: str, method: str, spec: dict[str, Any]) -> dict[str, Any]:
    """What a method needs of one operation."""
    params = []
    for param in spec.get("parameters", []):
        schema = param.get("schema", {})
        kind = python_type(schema)
        required = param.get("required", False)
        params.append(
            {
                "name": param["name"],
                "arg": identifier(param["name"]),
                "in": param["in"],
                "type": kind if required or "None" in kind else f"{kind} | None",
                "required": required,
            }
        )
    body = None
    content = spec.get("requestBody", {}).get("content", {}).get("application/json")
    if content is not None:
        body = model_of(content["schema"])
    statuses = sorted(code for code in spec["responses"] if code.startswith("2"))
    answer = spec["responses"][statuses[0]].get("content", {}).get("application/json")
    returns = "None" if answer is None else model_of(answer.get("schema", {}))
    name = spec["operationId"]
    if name in TEXT:
        returns = "str"
    if name in BINARY:
        returns = "bytes"
    return {"name": name, "method": method.upper(), "path": path, "params": params, "body": body, "returns": returns}


def signature(op: dict[str, Any]) -> str:
    args = ["self"]
    args += [f"{p['arg']}: {p['type']}" for p in op["params"] if p["in"] == "path"]
    if op["body"] is not None:
        args.append(f"body: {op['body']} | Mapping[str, Any]")
    rest = [p for p in op["params"] if p["in"] != "path"]
    args.append("*")
    args += [f"{p['arg']}: {p['type']}" for p in rest if p["required"]]
    args += [f"{p['arg']}: {p['type']} = None" for p in rest if not p["required"]]
    args.append("extra_query: Mapping[str, str] | None = None")
    return ", ".join(args)


def call(op: dict[str, Any]) -> str:
    def table(place: str) -> str:
        return "{" + ", ".join(f'"{p["name"]}": {p["arg"]}' for p in op["params"] if p["in"] == place) + "}"

    body = "body" if op["body"] is not None else "None"
    tables = f"{table('path')}, {table('query')}, {table('header')}"
    return f"self._call({op['name'].upper()}, {tables}, {body}, extra_query)"


def doc_line(spec: dict[str, Any]) -> str:
    text = spec.get("summary") or spec["operationId"]
    return text.replace('"""', "'").replace("\\", "\\\\")


def operations(openapi: dict[str, Any]) -> str:
    """taskq_client/_operations.py: every operation but the streams, as a method of each mixin."""
    ops = []
    for path, item in openapi["paths"].items():
        for method, spec in item.items():
            if spec["operationId"] not in STREAMS:
                ops.append((operation(path, method, spec), spec))
    lines = [
        '"""Every operation of the API as a typed method, generated from its OpenAPI document by generate.py:',
        "`Ops` for `Client`, `AsyncOps` for `AsyncClient`. Each sends its request through `_call` and reads the",
        'answer into its model; an error answer raises `ApiError`."""',
        "",
        "from collections.abc import Mapping",
        "from typing import Any, cast",
        "",
        "from taskq_client import models",
        "from taskq_client._base import AsyncTransport, Op, SyncTransport",
        "",
        f'API_VERSION = "{openapi["info"]["version"]}"',
        "",
    ]
    for op, _ in ops:
        lines.append(f'{op["name"].upper()} = Op("{op["method"]}", "{op["path"]}", {op["returns"]})')
    for cls, base, prefix in (("Ops", "SyncTransport", ""), ("AsyncOps", "AsyncTransport", "async ")):
        lines += ["", "", f"class {cls}({base}):"]
        for op, spec in ops:
            sent = ("await " if prefix else "") + call(op)
            returns = op["returns"]
            lines += [
                f"    {prefix}def {op['name']}({signature(op)}) -> {returns}:",
                f'        """{op["method"]} {op["path"]}: {doc_line(spec)}"""',
                f"        {sent}" if returns == "None" else f'        return cast("{returns}", {sent})',
                "",
            ]
    return "\n".join(lines).rstrip() + "\n"


def generate(into: Path) -> None:
    """Write the three generated files under `into` (the client's folder, or a copy of its layout)."""
    openapi = document()
    (into / "taskq_client").mkdir(parents=True, exist_ok=True)
    (into / "openapi.json").write_text(json.dumps(openapi, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    models(into / "openapi.json", into / "taskq_client" / "models.py")
    target = into / "taskq_client" / "_operations.py"
    target.write_text(operations(openapi))
    ruff = [str(Path(sys.executable).parent / "ruff"), "format", "-q", "--config", str(ROOT / "pyproject.toml")]
    written = [str(target), str(into / "taskq_client" / "models.py")]
    # Once without magic trailing commas, so the result does not hang on where the generator broke its lines.
    subprocess.run([*ruff, "--config", "format.skip-magic-trailing-comma=true", *written], check=True)
    subprocess.run([*ruff, *written], check=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--into", type=Path, default=HERE, help="where to write (default: the client's folder)")
    generate(parser.parse_args().into)
