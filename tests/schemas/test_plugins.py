"""Job type plugins as the registries read them: entry points and modules, each checked; and a plugin that fails
stops `python -m app` at start-up with its message (docs/plugins.md). The example plugin installed into a virtual
environment and run end to end is tests/flows/test_plugins.py."""

import subprocess
import sys
from importlib.metadata import EntryPoint

import pytest

from app.handlers.registry import BUILT_IN
from app.schemas.payloads.plugins import GROUP, PluginError, checked, discover, modules_setting
from tests.conftest import make_settings, settings_env
from tests.schemas import plugin_samples
from tests.support import ROOT

SAMPLES = "tests.schemas.plugin_samples"


def point(attribute: str) -> EntryPoint:
    return EntryPoint(name=attribute.lower(), value=f"{SAMPLES}:{attribute}", group=GROUP)


def test_entry_points_and_modules_give_their_job_types_beside_the_built_in_ones() -> None:
    plugins = discover([point("PAIR"), point("PAIR")], [SAMPLES])  # one distribution seen twice: once
    assert [(p.job_type.name, p.source.split(" (")[0]) for p in plugins] == [
        ("shout", "the plugin an installed package"),
        ("whisper", "the plugin an installed package"),
        ("shout", f"the module {SAMPLES}"),
    ]
    types = checked(list(BUILT_IN), plugins[:2])
    assert types == {"shout": plugin_samples.JOB_TYPE, "whisper": plugin_samples.WHISPER}


def test_job_type_modules_is_a_comma_separated_list() -> None:
    assert modules_setting(" a.b, c ,,") == ["a.b", "c"]
    assert modules_setting("") == []


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            point("CLASH"),
            "registers the job type 'echo', which the service (a built-in type) already has. Give the plugin's type "
            "another name",
        ),
        (point("DOTTED"), "registers a job type named 'shout.loud'; a name is 1-64 letters, digits, '_' or '-'"),
    ],
)
def test_a_name_a_built_in_has_or_events_cannot_route_is_refused(entry: EntryPoint, message: str) -> None:
    with pytest.raises(PluginError, match=message.replace("(", r"\(").replace(")", r"\)")):
        checked(list(BUILT_IN), discover([entry], []))


def test_two_plugins_with_one_name_are_refused_naming_both() -> None:
    with pytest.raises(PluginError) as refused:
        checked(list(BUILT_IN), discover([point("JOB_TYPE")], [SAMPLES]))
    assert str(refused.value).startswith(
        f"the module {SAMPLES} (JOB_TYPE_MODULES) registers the job type 'shout', which the plugin an installed "
        f"package (entry point job_type = {SAMPLES}:JOB_TYPE, group taskq.job_types) already has."
    )


@pytest.mark.parametrize(
    ("points", "modules", "message"),
    [
        ([point("NOT_A_TYPE")], [], "gives str, not job types: point it at a JobType"),
        ([EntryPoint("gone", "no_such_plugin:JOB_TYPE", GROUP)], [], "failed to load: ModuleNotFoundError"),
        ([], ["tests.schemas.broken_plugin"], "failed to import: RuntimeError: WORDS_API_TOKEN is not set"),
        ([], ["tests.schemas"], "gives NoneType, not job types"),  # a module without JOB_TYPE or JOB_TYPES
    ],
)
def test_a_plugin_that_does_not_load_says_which_and_why(
    points: list[EntryPoint], modules: list[str], message: str
) -> None:
    with pytest.raises(PluginError, match=message):
        discover(points, modules)


@pytest.mark.parametrize(
    ("modules", "message"),
    [
        (
            "tests.schemas.broken_plugin",
            "Cannot start: the module tests.schemas.broken_plugin (JOB_TYPE_MODULES) failed to import: RuntimeError: "
            "WORDS_API_TOKEN is not set. Fix the module, or take it out of JOB_TYPE_MODULES.\n",
        ),
        (
            "tests.schemas.plugin_clash",
            "Cannot start: the module tests.schemas.plugin_clash (JOB_TYPE_MODULES) registers the job type 'echo', "
            "which the service (a built-in type) already has.",
        ),
    ],
)
@pytest.mark.parametrize("command", [["api"], ["worker", "jobs"]])
def test_a_broken_plugin_stops_start_up_with_its_message(command: list[str], modules: str, message: str) -> None:
    env = settings_env(make_settings(job_type_modules=modules))
    ran = subprocess.run(
        [sys.executable, "-m", "app", *command], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert ran.returncode == 2, ran.stderr
    assert ran.stderr.startswith(message), ran.stderr
