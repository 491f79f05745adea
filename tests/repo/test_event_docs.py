"""docs/webhooks.md shows the event bodies' fields as the catalogue's JSON Schemas say them."""

from app.services.event_docs import END, PAGE, START, render, written


def test_the_webhooks_page_holds_the_event_bodies_as_rendered_from_their_schemas() -> None:
    page = PAGE.read_text()
    assert page.count(START) == 1 and page.count(END) == 1
    assert written(page) == page, "docs/webhooks.md is stale: run .venv/bin/python -m app.services.event_docs"
    assert "| `seq` | integer |" in render() and "| `finished_at` | date-time or null |" in render()


def test_a_stale_page_is_seen() -> None:
    page = PAGE.read_text()
    stale = page.replace("| `seq` | integer |", "| `seq` | string |")
    assert written(stale) != stale
