"""The layers of docs/architecture.md, as imports: each package of app/ imports only what the page says it may."""

import ast
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parents[2] / "app"
# What each package may never import (at import time or inside a function alike).
NEVER = {
    "core": ("app.api", "app.workers", "app.services", "app.handlers", "app.models", "app.schemas"),
    "models": ("app.api", "app.workers", "app.services", "app.handlers", "app.stores"),
    "schemas": ("app.api", "app.workers", "app.services", "app.handlers", "app.stores"),
    "stores": ("app.api", "app.workers", "app.services", "app.handlers"),
    "services": ("app.api", "app.workers", "app.handlers"),
}
# core/resources.py opens the stores: the one place a process's connections and its stores are made together.
ALLOWED = {("core/resources.py", "app.stores")}


def imports_of(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


@pytest.mark.parametrize("package", sorted(NEVER))
def test_a_package_imports_nothing_from_the_layers_above_it(package: str) -> None:
    crossings = [
        f"{path.relative_to(APP)} imports {module}"
        for path in sorted((APP / package).rglob("*.py"))
        for module in sorted(imports_of(path))
        if module.startswith(NEVER[package])
        and (str(path.relative_to(APP)), module.split(".", 2)[0] + "." + module.split(".")[1]) not in ALLOWED
    ]
    assert crossings == []


def test_the_check_sees_a_crossing() -> None:
    assert "app.workers.verdicts" in imports_of(APP / "workers" / "jobs" / "claims.py")
