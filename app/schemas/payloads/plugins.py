"""Job types from outside the service (docs/plugins.md): the `JobType`s that installed packages register under the
`taskq.job_types` entry-point group, and those of the modules `JOB_TYPE_MODULES` names.

They are read once per process, when the registries are first imported (the API's request models are built from
them at import), so a plugin that fails to load, or whose name clashes with a built-in type or another plugin's,
stops the process at start-up with a `PluginError` that says which and what to do; `python -m app` prints it."""

import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import import_module
from importlib.metadata import EntryPoint, entry_points
from types import ModuleType
from typing import Any, Protocol, runtime_checkable

from app.core.config import get_settings
from app.schemas.payloads.base import PayloadSpec

GROUP = "taskq.job_types"
# A type's name is part of event routing keys (`job.<type>.<status>`, no dots) and of a 64-character column.
NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")


@runtime_checkable
class JobTypeLike(Protocol):
    """What a plugin registers: an `app.handlers.base.JobType` (its spec here, its handler for the job worker)."""

    @property
    def spec(self) -> PayloadSpec: ...

    @property
    def handler(self) -> Callable[[Any, Any], Awaitable[Any]]: ...

    @property
    def name(self) -> str: ...


class PluginError(Exception):
    """A job type plugin that cannot be used: the message names it and says what to do."""


@dataclass(frozen=True)
class Plugin:
    """One job type from outside the service, and where it came from (a distribution's entry point, a module)."""

    job_type: JobTypeLike
    source: str


def modules_setting(value: str) -> list[str]:
    """The module names of a comma-separated JOB_TYPE_MODULES."""
    return [name.strip() for name in value.split(",") if name.strip()]


@cache
def installed() -> tuple[Plugin, ...]:
    """This process's plugins: the entry points' then JOB_TYPE_MODULES', read once."""
    return discover(entry_points(group=GROUP), modules_setting(get_settings().job_type_modules))


def plugin_types(builtins: Sequence[str]) -> dict[str, JobTypeLike]:
    """This process's plugins' types by name, checked against the built-in `builtins` and each other."""
    return checked(builtins, installed())


def discover(points: Iterable[EntryPoint], modules: Sequence[str]) -> tuple[Plugin, ...]:
    """The job types of these entry points and modules, each checked; PluginError on the first that fails."""
    # A distribution on the path twice (a .pth file naming a folder already there) lists its entry points twice.
    unique = {(point.name, point.value): point for point in points}.values()
    found = [plugin for point in unique for plugin in _from_entry_point(point)]
    found += [plugin for name in modules for plugin in _from_module(name)]
    return tuple(found)


def checked(builtins: Sequence[str], plugins: Sequence[Plugin]) -> dict[str, JobTypeLike]:
    """The plugins' types by name; PluginError for a name that is not allowed, a built-in's, or taken twice."""
    taken: dict[str, str] = {name: "the service (a built-in type)" for name in builtins}
    types: dict[str, JobTypeLike] = {}
    for plugin in plugins:
        name = plugin.job_type.name
        if not NAME.match(name):
            raise PluginError(
                f"{plugin.source} registers a job type named {name!r}; a name is 1-64 letters, digits, '_' or '-', "
                "starting with a letter. Rename it in the plugin's PayloadSpec."
            )
        if name in taken:
            raise PluginError(
                f"{plugin.source} registers the job type {name!r}, which {taken[name]} already has. "
                "Give the plugin's type another name (its PayloadSpec's first argument), or remove one of the two."
            )
        taken[name] = plugin.source
        types[name] = plugin.job_type
    return types


def _from_entry_point(point: EntryPoint) -> list[Plugin]:
    dist = point.dist.name if point.dist is not None else "an installed package"
    source = f"the plugin {dist} (entry point {point.name} = {point.value}, group {GROUP})"
    try:
        value = point.load()
    except Exception as exc:
        raise PluginError(
            f"{source} failed to load: {type(exc).__name__}: {exc}. Fix the plugin, or uninstall it "
            f"(pip uninstall {dist})."
        ) from exc
    return [Plugin(job_type, source) for job_type in _job_types(value, source)]


def _from_module(name: str) -> list[Plugin]:
    source = f"the module {name} (JOB_TYPE_MODULES)"
    try:
        module = import_module(name)
    except Exception as exc:
        raise PluginError(
            f"{source} failed to import: {type(exc).__name__}: {exc}. Fix the module, or take it out of "
            "JOB_TYPE_MODULES."
        ) from exc
    return [Plugin(job_type, source) for job_type in _job_types(module, source)]


def _job_types(value: object, source: str) -> list[JobTypeLike]:
    """What a plugin names: a JobType, a list of them, or a module with JOB_TYPE or JOB_TYPES."""
    if isinstance(value, ModuleType):
        value = getattr(value, "JOB_TYPES", getattr(value, "JOB_TYPE", None))
    given = list(value) if isinstance(value, list | tuple) else [value]
    many = [one for one in given if isinstance(one, JobTypeLike) and isinstance(one.spec, PayloadSpec)]
    if not many or len(many) != len(given):
        raise PluginError(
            f"{source} gives {type(value).__name__}, not job types: point it at a JobType (from app.handlers.base), "
            "a list of them, or a module that defines JOB_TYPE or JOB_TYPES."
        )
    return many
