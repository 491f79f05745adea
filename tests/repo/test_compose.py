"""The container setup: docker-compose.yml against the Compose Specification, and the Dockerfile essentials."""

import json
import os
import re
import shlex
import stat
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import yaml
from jsonschema import Draft7Validator

from app.__main__ import build_parser
from app.core.config import Settings
from app.main import create_app
from tests.conftest import make_settings

ROOT = Path(__file__).resolve().parents[2]
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
    assert {name for name, service in compose["services"].items() if "cluster" not in service.get("profiles", [])} == {
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


def test_the_cluster_profile_is_three_rabbitmq_nodes_that_know_one_another() -> None:
    services = load_compose()["services"]
    nodes = {name: service for name, service in services.items() if "cluster" in service.get("profiles", [])}
    assert sorted(nodes) == ["rabbitmq-1", "rabbitmq-2", "rabbitmq-3"]
    config = (ROOT / "docker" / "rabbitmq-cluster" / "rabbitmq.conf").read_text()
    for name, node in nodes.items():
        assert node["hostname"] == name
        assert f"rabbit@{name}" in config
        assert "./docker/rabbitmq-cluster/rabbitmq.conf:/etc/rabbitmq/rabbitmq.conf:ro" in node["volumes"]
        assert (
            node["environment"]["RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS"] == node["environment"]["RABBITMQ_CTL_ERL_ARGS"]
        )
        assert node["healthcheck"]["test"]
    assert len({node["environment"]["RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS"] for node in nodes.values()}) == 1
    assert len({node["ports"][0] for node in nodes.values()}) == 3


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


# --- Consistency: every name, port, volume and command in the compose file points at something real. ----------

PROFILE = "observability"
APP_SERVICES = ("api", "job_worker", "webhook_worker")  # built from this repository, run `python -m app …`


def services() -> dict[str, Any]:
    found: dict[str, Any] = load_compose()["services"]
    return found


def depends_on(service: dict[str, Any]) -> dict[str, str]:
    """Each service it waits for, and the condition (a list means `service_started`)."""
    given = service.get("depends_on", {})
    if isinstance(given, list):
        return dict.fromkeys(given, "service_started")
    return {name: spec.get("condition", "service_started") for name, spec in given.items()}


def has_healthcheck(service: dict[str, Any]) -> bool:
    check = service.get("healthcheck", {})
    return bool(check.get("test")) and check.get("disable") is not True


def container_ports(service: dict[str, Any]) -> set[int]:
    return {int(str(port).rsplit(":", 1)[-1]) for port in service.get("ports", [])}


def bind_mounts(service: dict[str, Any]) -> dict[str, str]:
    """Container path -> repository path, for each `./…` volume."""
    mounts = {}
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        if source.startswith("./"):
            mounts[target] = source.removeprefix("./")
    return mounts


def in_repo(service: dict[str, Any], container_path: str) -> Path:
    """Where a path the container sees comes from in this repository."""
    for target, source in bind_mounts(service).items():
        if container_path == target or container_path.startswith(target + "/"):
            return ROOT / source / container_path.removeprefix(target).lstrip("/")
    raise AssertionError(f"{container_path} is not under any bind mount of the service")


def cli_args(service: dict[str, Any]) -> list[str]:
    given = service["command"]
    return shlex.split(given) if isinstance(given, str) else list(given)


def test_every_dependency_is_a_service_whose_condition_it_can_meet() -> None:
    all_services = services()
    problems = []
    for name, service in all_services.items():
        for target, condition in depends_on(service).items():
            if target not in all_services:
                problems.append(f"{name} waits for {target}, which is not a service")
                continue
            if condition == "service_healthy" and not has_healthcheck(all_services[target]):
                problems.append(f"{name} waits for {target} to be healthy, but it has no health check")
            if condition == "service_completed_successfully" and all_services[target].get("restart") != "no":
                problems.append(f"{name} waits for {target} to finish, but it restarts")
            if all_services[target].get("profiles") and not service.get("profiles"):
                problems.append(f"{name} starts without a profile but waits for {target}, which needs one")
    assert problems == []


def test_the_observability_services_start_only_with_their_profile() -> None:
    profiled = {name for name, service in services().items() if PROFILE in service.get("profiles", [])}
    assert profiled == {"prometheus", "grafana"}
    assert all(services()[name]["profiles"] == [PROFILE] for name in profiled)


def test_host_ports_are_unique_and_named_volumes_declared_and_used() -> None:
    host_ports = [str(port).rsplit(":", 1)[0] for s in services().values() for port in s.get("ports", [])]
    assert len(host_ports) == len(set(host_ports)), host_ports
    used = {
        volume.split(":")[0]
        for service in services().values()
        for volume in service.get("volumes", [])
        if not volume.startswith(("./", "/"))
    }
    assert used == set(load_compose()["volumes"])


def test_every_mounted_file_exists_in_the_repository() -> None:
    sources = [source for service in services().values() for source in bind_mounts(service).values()]
    assert sources, "no bind mounts: the observability services lost their config"
    assert [source for source in sources if not (ROOT / source).exists()] == []


def test_the_app_services_run_real_commands_with_real_settings() -> None:
    parser = build_parser()
    kinds = {}
    for name in APP_SERVICES:
        service = services()[name]
        assert service["build"] == "."
        args = parser.parse_args(cli_args(service))
        if args.command == "worker":
            kinds[name] = args.kind
    assert parser.parse_args(cli_args(services()["api"])).command == "api"
    assert kinds == {"job_worker": "jobs", "webhook_worker": "webhooks"}
    environment = services()["api"]["environment"]
    names = {key.lower() for key in environment if key != "RUN_MIGRATIONS"}
    assert names - set(Settings.model_fields) == set()
    Settings(_env_file=None, **{key.lower(): value for key, value in environment.items() if key != "RUN_MIGRATIONS"})


def test_the_api_migrates_before_the_workers_start() -> None:
    api = services()["api"]
    assert api["environment"]["RUN_MIGRATIONS"] == "true"
    entrypoint = ENTRYPOINT.read_text()
    assert (
        'if [[ "${1:-}" == "api" ]] && is_true "${RUN_MIGRATIONS:-true}"; then\n  python -m app migrate\nfi'
        in entrypoint
    )
    assert build_parser().parse_args(["migrate"]).command == "migrate"
    for name in ("job_worker", "webhook_worker"):
        assert depends_on(services()[name])["api"] == "service_healthy"


async def test_the_api_health_check_calls_a_real_route_on_the_api_port() -> None:
    test = " ".join(services()["api"]["healthcheck"]["test"])
    url = urlsplit(re.findall(r"http://[^'\"\s]+", test)[0])
    dockerfile_check = dict(dockerfile_instructions())["HEALTHCHECK"]
    assert url.geturl() in dockerfile_check
    assert url.port == Settings.model_fields["port"].default
    assert url.port in container_ports(services()["api"])
    transport = httpx.ASGITransport(app=create_app(make_settings()))
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
        answer = await client.get(url.path)
    assert (answer.status_code, answer.json()) == (200, {"status": "ok"})


def test_prometheus_scrapes_the_services_and_loads_the_rules() -> None:
    prometheus = services()["prometheus"]
    config_path = in_repo(prometheus, "/etc/prometheus/prometheus.yml")
    config = yaml.safe_load(config_path.read_text())
    for rules in config["rule_files"]:
        assert (config_path.parent / rules).is_file(), rules
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    [target] = jobs["taskq-api"]["static_configs"][0]["targets"]
    host, port = target.split(":")
    assert host == "api" and int(port) in container_ports(services()[host])
    metrics_port = Settings.model_fields["metrics_port"].default
    for job_name, service_name in (("taskq-job-workers", "job_worker"), ("taskq-webhook-workers", "webhook_worker")):
        [dns] = jobs[job_name]["dns_sd_configs"]
        assert (dns["names"], dns["port"]) == ([service_name], metrics_port)
        assert "METRICS_PORT" not in services()[service_name].get("environment", {})


def test_grafana_reads_the_provisioned_prometheus_and_dashboards() -> None:
    grafana = services()["grafana"]
    provisioning = in_repo(grafana, "/etc/grafana/provisioning")
    [source] = yaml.safe_load((provisioning / "datasources" / "prometheus.yml").read_text())["datasources"]
    url = urlsplit(source["url"])
    assert url.hostname == "prometheus" and url.port in container_ports(services()["prometheus"])
    assert depends_on(grafana) == {"prometheus": "service_started"}
    [provider] = yaml.safe_load((provisioning / "dashboards" / "dashboards.yml").read_text())["providers"]
    dashboards = list(in_repo(grafana, provider["options"]["path"]).glob("*.json"))
    assert dashboards
    uids = {found for path in dashboards for found in re.findall(r'"uid":\s*"(\w+)"', path.read_text())}
    assert source["uid"] in uids
