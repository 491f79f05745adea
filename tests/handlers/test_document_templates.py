"""The `document` type's named templates without services: each layout, its page count read back with pypdf."""

import io
from typing import Any

import pytest
from pydantic import ValidationError
from pypdf import PdfReader

from app.handlers.document import render_pdf
from app.handlers.document_templates import spread
from app.schemas.payloads.document import DocumentPayload

SAMPLE_TEXT = {"invoice": "Invoice INV-0001", "report": "Quarterly report", "letter": "Dear Ms Doe,"}
LAST_PAGE_TEXT = {"invoice": "Total due", "report": "Findings, part", "letter": "Yours sincerely,"}


def render(payload: dict[str, Any]) -> tuple[PdfReader, int]:
    data, pages = render_pdf(DocumentPayload.model_validate(payload).model_dump())
    return PdfReader(io.BytesIO(data)), pages


@pytest.mark.parametrize("template", ["invoice", "report", "letter"])
@pytest.mark.parametrize("pages", [1, 3, 8])
def test_each_template_with_sample_data_has_the_pages_asked_for(template: str, pages: int) -> None:
    reader, counted = render({"template": template, "pages": pages})
    assert counted == len(reader.pages) == pages
    assert SAMPLE_TEXT[template] in reader.pages[0].extract_text()
    assert LAST_PAGE_TEXT[template] in reader.pages[-1].extract_text()
    for number, page in enumerate(reader.pages, start=1):
        assert f"Page {number}" in page.extract_text()


@pytest.mark.parametrize(("page_size", "points"), [("A4", (595, 842)), ("letter", (612, 792))])
def test_a_template_takes_the_page_size_and_author(page_size: str, points: tuple[int, int]) -> None:
    reader, _ = render({"template": "report", "page_size": page_size, "author": "Ops team"})
    box = reader.pages[0].mediabox
    assert (round(box.width), round(box.height)) == points
    assert reader.metadata is not None
    assert (reader.metadata.title, reader.metadata.author) == ("Quarterly report", "Ops team")


def test_an_invoice_is_filled_from_its_data_and_totals_its_lines() -> None:
    data = {
        "number": "A-77",
        "customer": "Globex",
        "currency": "USD",
        "tax_rate": 10,
        "lines": [
            {"description": "Widget", "quantity": 3, "unit_price": 2.5},
            {"description": "Gadget", "quantity": 1, "unit_price": 100},
        ],
    }
    reader, pages = render({"template": "invoice", "data": data})
    text = reader.pages[0].extract_text()
    assert pages == 1
    for expected in ("Invoice A-77", "Globex", "Widget", "Gadget", "7.50", "107.50", "10.75", "118.25", "USD"):
        assert expected in text, expected
    assert reader.metadata is not None and reader.metadata.title == "Invoice A-77"


def test_a_letter_and_a_report_are_filled_from_their_data() -> None:
    letter_data = {"recipient": "Mr Bond", "salutation": "Dear James,", "paragraphs": ["Hi."]}
    letter = {"template": "letter", "data": letter_data}
    report = {"template": "report", "data": {"title": "Incident review", "sections": [{"heading": "Timeline"}]}}
    letter_text = render(letter)[0].pages[0].extract_text()
    report_text = render(report)[0].pages[0].extract_text()
    assert "Mr Bond" in letter_text and "Dear James," in letter_text and "Hi." in letter_text
    assert "Incident review" in report_text and "Timeline" in report_text


def test_more_pages_than_content_still_gives_that_many_pages() -> None:
    one_line = {"lines": [{"description": "Widget", "quantity": 1, "unit_price": 1}]}
    reader, pages = render({"template": "invoice", "pages": 3, "data": one_line})
    assert pages == len(reader.pages) == 3
    assert "This page is intentionally left blank." in reader.pages[1].extract_text()
    assert "Total due" in reader.pages[2].extract_text()


def test_data_that_does_not_fit_takes_more_pages_and_says_how_many() -> None:
    lines = [{"description": f"Item {n}", "quantity": 1, "unit_price": 1} for n in range(200)]
    reader, pages = render({"template": "invoice", "pages": 1, "data": {"lines": lines}})
    assert pages == len(reader.pages) > 1
    assert "Item 199" in reader.pages[-1].extract_text()


def test_items_spread_evenly_and_in_order_over_the_pages() -> None:
    assert spread([1, 2, 3, 4, 5], 3) == [[1, 2], [3, 4], [5]]
    assert spread([1], 3) == [[1], [], []]
    assert spread([], 2) == [[], []]


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"template": "poster"}, "`template` must be invoice, report or letter"),
        ({"template": 7}, "`template` must be invoice, report or letter"),
        ({"template": "invoice", "pages": 0}, "greater than or equal to 1"),
        ({"template": "invoice", "pages": 51}, "less than or equal to 50"),
        ({"template": "invoice", "title": "x"}, "Extra inputs are not permitted"),
        ({"template": "invoice", "data": {"lines": []}}, "at least 1 item"),
        ({"template": "letter", "data": {"paragraphs": ["x"], "tone": "warm"}}, "Extra inputs are not permitted"),
        ({"title": "no content"}, "Field required"),
    ],
)
def test_a_bad_template_payload_is_refused_with_a_sentence(payload: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        DocumentPayload.model_validate(payload)
