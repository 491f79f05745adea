"""`.env.example` and `docs/settings.md` against the settings model: every setting, with its default, nothing stale."""

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.core import settings_doc
from app.core.config import Settings
from tests.support import ROOT

ROW = re.compile(r"^\| `([A-Z0-9_]+)` \| (.+?) \| (.+) \|$")


def env_example_pairs() -> list[tuple[str, str]]:
    lines = (ROOT / ".env.example").read_text().splitlines()
    pairs = (line.split("=", 1) for line in lines if line and not line.startswith("#"))
    return [(name, value) for name, value in pairs]


def page_rows() -> list[tuple[str, str, str]]:
    lines = (ROOT / "docs" / "settings.md").read_text().splitlines()
    return [(found[1], found[2], found[3]) for line in lines if (found := ROW.match(line))]


def loaded(pairs: list[tuple[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What Settings reads from a `.env` holding exactly these lines, with no setting in the environment."""
    for name in Settings.model_fields:
        monkeypatch.delenv(name.upper(), raising=False)
    env_file = tmp_path / "example.env"
    env_file.write_text("".join(f"{name}={value}\n" for name, value in pairs))
    return Settings(_env_file=env_file).model_dump()


def defaults() -> dict[str, Any]:
    return {name: field.default for name, field in Settings.model_fields.items()}


def test_the_generated_files_are_what_the_model_gives() -> None:
    stale = [str(path.relative_to(ROOT)) for path in settings_doc.stale()]
    assert stale == [], "run `python -m app settings-doc` and commit the result"


def test_every_setting_has_a_description() -> None:
    assert [name for name, field in Settings.model_fields.items() if not settings_doc.description(field)] == []


def test_env_example_lists_each_setting_once_with_its_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pairs = env_example_pairs()
    names = [name for name, _ in pairs]
    assert sorted(names) == sorted(name.upper() for name in Settings.model_fields)
    assert loaded(pairs, tmp_path, monkeypatch) == defaults()


def test_the_settings_page_lists_each_setting_once_with_its_default_and_description(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = page_rows()
    assert sorted(name for name, _, _ in rows) == sorted(name.upper() for name in Settings.model_fields)
    pairs = [(name, "" if cell == "*unset*" else cell.strip("`")) for name, cell, _ in rows]
    assert loaded(pairs, tmp_path, monkeypatch) == defaults()
    for name, _, text in rows:
        assert text.replace("\\|", "|") == settings_doc.description(Settings.model_fields[name.lower()])


def test_a_new_setting_would_show_in_both_files(monkeypatch: pytest.MonkeyPatch) -> None:
    class Wider(Settings):
        brand_new_knob: int = 7
        """A setting added after the files were written."""

    monkeypatch.setattr(settings_doc, "Settings", Wider)
    env, page = settings_doc.env_example(), settings_doc.settings_page()
    assert "# A setting added after the files were written.\nBRAND_NEW_KNOB=7\n" in env
    assert "| `BRAND_NEW_KNOB` | `7` | A setting added after the files were written. |" in page
    assert env != (ROOT / ".env.example").read_text()


def test_the_check_command_passes_on_the_committed_files() -> None:
    check = subprocess.run(
        [sys.executable, "-m", "app", "settings-doc", "--check"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert (check.returncode, check.stderr) == (0, "")
