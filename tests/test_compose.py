"""The container setup: docker-compose.yml against the Compose Specification, and the Dockerfile essentials."""

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft7Validator

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_SCHEMA = ROOT / "tests" / "data" / "compose-spec.json"  # the Compose Specification's JSON Schema, vendored
ENTRYPOINT = ROOT / "docker" / "entrypoint.sh"


def load_compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with comments dropped and continuation lines joined."""
    text = (ROOT / "Dockerfile").read_text()
    lines = [line.rstrip() for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = "\n".join(lines).replace("\\\n", " ")
    instructions = []
    for line in filter(str.strip, joined.splitlines()):
        keyword, _, args = line.strip().partition(" ")
        instructions.append((keyword.upper(), args.strip()))
    return instructions


def test_compose_file_matches_the_compose_specification() -> None:
    validator = Draft7Validator(json.loads(COMPOSE_SCHEMA.read_text()))
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(load_compose())]
    assert errors == []


def test_compose_defines_exactly_the_stack() -> None:
    compose = load_compose()
    assert "version" not in compose
    assert set(compose["services"]) == {
        "api",
        "job_worker",
        "webhook_worker",
        "rabbitmq",
        "redis",
        "mssql",
        "mssql-init",
        "prometheus",
        "grafana",
    }


def test_prometheus_and_grafana_mount_the_repository_config() -> None:
    services = load_compose()["services"]
    assert "./docker/prometheus:/etc/prometheus:ro" in services["prometheus"]["volumes"]
    assert "--config.file=/etc/prometheus/prometheus.yml" in services["prometheus"]["command"]
    grafana = services["grafana"]["volumes"]
    assert "./docker/grafana/provisioning:/etc/grafana/provisioning:ro" in grafana
    assert "./docker/grafana/dashboards:/var/lib/grafana/dashboards:ro" in grafana
    for path in ("docker/prometheus/prometheus.yml", "docker/grafana/dashboards/taskq.json"):
        assert (ROOT / path).is_file()


@pytest.mark.parametrize("name", ["api", "rabbitmq", "redis", "mssql"])
def test_long_running_service_has_a_healthcheck(name: str) -> None:
    healthcheck = load_compose()["services"][name]["healthcheck"]
    assert healthcheck.get("disable") is not True
    assert healthcheck["test"]


def test_api_waits_for_healthy_infrastructure_and_the_database() -> None:
    depends_on = load_compose()["services"]["api"]["depends_on"]
    for name in ("rabbitmq", "redis", "mssql"):
        assert depends_on[name]["condition"] == "service_healthy"
    assert depends_on["mssql-init"]["condition"] == "service_completed_successfully"


@pytest.mark.parametrize(("name", "command"), [("job_worker", "worker jobs"), ("webhook_worker", "worker webhooks")])
def test_worker_runs_its_lane(name: str, command: str) -> None:
    service = load_compose()["services"][name]
    given = service["command"]
    assert (given if isinstance(given, str) else " ".join(given)) == command
    assert service["deploy"]["replicas"] == 2


def test_dockerfile_essentials() -> None:
    instructions = dockerfile_instructions()
    keywords = [keyword for keyword, _ in instructions]
    users = [args for keyword, args in instructions if keyword == "USER"]
    entrypoints = [args for keyword, args in instructions if keyword == "ENTRYPOINT"]
    assert "HEALTHCHECK" in keywords
    assert users and users[-1].split(":")[0] not in {"root", "0"}
    assert any(keyword == "COPY" and "requirements.txt" in args for keyword, args in instructions)
    assert entrypoints and "docker/entrypoint.sh" in entrypoints[-1]


def test_entrypoint_is_an_executable_strict_bash_script() -> None:
    assert os.access(ENTRYPOINT, os.X_OK)
    assert ENTRYPOINT.stat().st_mode & stat.S_IXUSR
    text = ENTRYPOINT.read_text()
    assert text.startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail" in text
