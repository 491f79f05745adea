"""The dashboard's stylesheet is whole: every block it opens is closed, and each section's rules (a comment at the
start of a line opens a section) stand at the top level, not inside the narrow-screen block before them. A brace
lost in a merge makes the browser read every later rule as part of an `@media` block, and the overview's numbers
and charts then draw unstyled on a wide screen, with no console error to show it."""

from tests.support import ROOT

STYLESHEET = ROOT / "app" / "dashboard" / "static" / "dashboard.css"


def depths(text: str) -> list[tuple[int, int, str]]:
    """(line number, depth before the line, the line) for each line, the depth counted in braces."""
    depth, lines = 0, []
    for number, line in enumerate(text.splitlines(), 1):
        lines.append((number, depth, line))
        depth += line.count("{") - line.count("}")
        assert depth >= 0, f"{STYLESHEET.name}:{number} closes a block it never opened"
    lines.append((len(lines) + 1, depth, ""))
    return lines


def test_every_block_of_the_stylesheet_is_closed() -> None:
    *_, (_, left_open, _) = depths(STYLESHEET.read_text())
    assert left_open == 0, f"{STYLESHEET.name} ends with {left_open} block(s) open"


def test_each_section_starts_at_the_top_level() -> None:
    nested = [
        f"{STYLESHEET.name}:{number}: {line}"
        for number, depth, line in depths(STYLESHEET.read_text())
        if line.startswith("/*") and depth > 0
    ]
    assert nested == []


def test_the_checks_find_a_lost_brace() -> None:
    broken = "@media (max-width: 640px) {\n  .a { color: red; }\n/* next */\n.b { color: blue; }\n"
    *_, (_, left_open, _) = depths(broken)
    assert left_open == 1
    assert [n for n, depth, line in depths(broken) if line.startswith("/*") and depth > 0] == [3]
