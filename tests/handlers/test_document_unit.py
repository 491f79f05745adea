"""The `document` job type without services: the PDF it lays out, its payload's 422s, its handler on fake tools."""

import hashlib
import io
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

import pytest
from pydantic import ValidationError
from pypdf import PdfReader

from app.handlers.base import JobContext
from app.handlers.document import JOB_TYPE, render_pdf
from app.schemas.payloads.document import DocumentPayload
from tests.fake_tools import FakeTools

T = TypeVar("T")


def make_payload(**overrides: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "title": "Quarterly report",
        "author": "Ada Lovelace",
        "content": [{"type": "paragraph", "text": "All is well."}],
    }
    return payload | overrides


def render(**overrides: Any) -> tuple[PdfReader, int]:
    payload = DocumentPayload.model_validate(make_payload(**overrides))
    data, pages = render_pdf(payload.model_dump())
    return PdfReader(io.BytesIO(data)), pages


def text_of(reader: PdfReader) -> str:
    return "\n".join(page.extract_text() for page in reader.pages)


def test_a_short_document_is_one_page_with_its_title_footer_and_metadata() -> None:
    reader, pages = render()
    assert pages == len(reader.pages) == 1
    first = reader.pages[0].extract_text()
    assert "Quarterly report" in first
    assert "Page 1" in first
    assert reader.metadata is not None
    assert reader.metadata.title == "Quarterly report"
    assert reader.metadata.author == "Ada Lovelace"


def test_pages_grow_with_content_and_each_is_numbered() -> None:
    paragraphs = [
        {"type": "paragraph", "text": f"Paragraph {n}. " + "Lorem ipsum dolor sit amet. " * 8} for n in range(200)
    ]
    reader, pages = render(content=paragraphs)
    assert pages == len(reader.pages) > 1
    for number, page in enumerate(reader.pages, start=1):
        assert f"Page {number}" in page.extract_text()


@pytest.mark.parametrize(("page_size", "points"), [("A4", (595, 842)), ("letter", (612, 792))])
def test_the_page_size(page_size: str, points: tuple[int, int]) -> None:
    reader, _ = render(page_size=page_size)
    box = reader.pages[0].mediabox
    assert (round(box.width), round(box.height)) == points


def test_every_block_type_renders() -> None:
    content = [
        {"type": "heading", "text": "Results"},
        {"type": "paragraph", "text": "Revenue rose."},
        {"type": "bullets", "items": ["first point", "second point"]},
        {"type": "table", "rows": [["Region", "Sales"], ["North", "42"], ["South", "17"]]},
    ]
    text = text_of(render(content=content)[0])
    for expected in ("Results", "Revenue rose.", "first point", "second point", "Region", "Sales", "North", "17"):
        assert expected in text


def test_text_is_shown_as_written_not_parsed_as_markup() -> None:
    text = text_of(render(content=[{"type": "paragraph", "text": "<b>not bold</b> & <unclosed"}])[0])
    assert "<b>not bold</b> & <unclosed" in text


def test_a_long_table_repeats_its_header_on_the_next_page() -> None:
    rows = [["Item", "Amount"]] + [[f"item {n}", str(n)] for n in range(120)]
    reader, pages = render(content=[{"type": "table", "rows": rows}])
    assert pages > 1
    assert "Item" in reader.pages[1].extract_text()


def test_it_renders_in_a_spawned_process_like_the_workers_cpu_pool() -> None:
    payload = DocumentPayload.model_validate(make_payload()).model_dump()
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        data, pages = pool.submit(render_pdf, payload).result(timeout=60)
    assert data.startswith(b"%PDF-")
    assert pages == 1


def test_without_an_author_the_metadata_has_none() -> None:
    reader, _ = render(author=None)
    assert reader.metadata is not None
    assert not reader.metadata.author


@pytest.mark.parametrize(
    "payload",
    [
        {"content": [{"type": "paragraph", "text": "no title"}]},  # missing field
        make_payload(title=42),  # wrong type
        make_payload(title=""),  # too short
        make_payload(title="x" * 201),  # too long
        make_payload(content=[]),  # no blocks
        make_payload(content=[{"type": "paragraph", "text": "x"}] * 501),  # too many blocks
        make_payload(content=[{"type": "quote", "text": "x"}]),  # unknown block
        make_payload(content=[{"type": "bullets", "items": []}]),  # empty list
        make_payload(content=[{"type": "paragraph", "text": "x" * 10_001}]),  # text too long
        make_payload(content=[{"type": "paragraph", "text": "x", "style": "bold"}]),  # extra field
        make_payload(page_size="A5"),  # not a choice
        make_payload(colour="blue"),  # extra field
    ],
)
def test_a_bad_payload_is_refused(payload: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        DocumentPayload.model_validate(payload)


def test_table_rows_of_unequal_length_are_refused_with_a_clear_message() -> None:
    rows = [["a", "b"], ["1", "2"], ["3"]]
    with pytest.raises(ValidationError, match="every table row needs 2 cells, like the header; row 3 has 1"):
        DocumentPayload.model_validate(make_payload(content=[{"type": "table", "rows": rows}]))


async def test_the_handler_stores_the_pdf_and_describes_it() -> None:
    tools = FakeTools()
    ctx = JobContext(job_id="job-1", job_type="document", attempt=1, runs=1, request_id=None, tools=tools)
    payload = DocumentPayload.model_validate(make_payload())

    result = await JOB_TYPE.handler(ctx, payload)

    data, content_type, filename = tools.artifacts["job-1"]
    assert (content_type, filename) == ("application/pdf", "document.pdf")
    assert data.startswith(b"%PDF-")
    assert result == {
        "pages": 1,
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "artifact_url": "/api/v1/jobs/job-1/artifact",
    }
