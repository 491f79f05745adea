"""The named layouts of the `document` type laid out: an invoice, a report and a letter, each filled from `data`
(or from sample data when there is none) and spread over the pages asked for."""

from collections.abc import Callable
from typing import TypeVar

from reportlab.lib.units import mm
from reportlab.platypus import Flowable, PageBreak, Spacer

from app.handlers.pdf_layout import para, table
from app.schemas.payloads.document_templates import (
    InvoiceData,
    InvoiceDocument,
    InvoiceLine,
    LetterDocument,
    ReportDocument,
    ReportSection,
    TemplateDocument,
)

T = TypeVar("T")
BLANK = "This page is intentionally left blank."


def spread(items: list[T], pages: int) -> list[list[T]]:
    """`items` in order over `pages` chunks, as evenly as they go (the first chunks take the extra ones)."""
    size, extra = divmod(len(items), pages)
    chunks, start = [], 0
    for page in range(pages):
        end = start + size + (page < extra)
        chunks.append(items[start:end])
        start = end
    return chunks


def fill_pages(
    first: list[Flowable],
    pages: int,
    items: list[T],
    render: Callable[[list[T]], list[Flowable]],
    heading: str | None = None,
) -> list[list[Flowable]]:
    """The first page's story and `pages - 1` more (each opened by `heading`), with `items` spread over them in
    order; a page left without any says it is blank on purpose."""
    later: list[list[Flowable]] = [[para(heading, "Heading2")] if heading else [] for _ in range(pages - 1)]
    stories = [first, *later]
    for story, chunk in zip(stories, spread(items, pages), strict=True):
        story.extend(render(chunk) if chunk else [para(BLANK)])
    return stories


def _invoice(document: InvoiceDocument, width: float) -> list[list[Flowable]]:
    data = document.filled()
    first: list[Flowable] = [
        para(document.title(), "Title"),
        table([["From", "Bill to"], [data.seller, data.customer]], width),
        para(f"Issued: {data.issued}" + (f"    Due: {data.due}" if data.due else "")),
    ]
    heading = f"{document.title()} (continued)"
    stories = fill_pages(
        first, document.pages, data.lines, lambda chunk: [_invoice_lines(chunk, data.currency, width)], heading
    )
    stories[-1].extend(_invoice_totals(data, width))
    return stories


def _invoice_lines(lines: list[InvoiceLine], currency: str, width: float) -> Flowable:
    rows = [["Description", "Quantity", f"Unit price ({currency})", f"Amount ({currency})"]]
    rows += [
        [n.description, f"{n.quantity:g}", f"{n.unit_price:,.2f}", f"{n.quantity * n.unit_price:,.2f}"] for n in lines
    ]
    return table(rows, width, [0.46, 0.14, 0.2, 0.2])


def _invoice_totals(data: InvoiceData, width: float) -> list[Flowable]:
    subtotal = sum(n.quantity * n.unit_price for n in data.lines)
    tax = subtotal * data.tax_rate / 100
    rows = [["", data.currency], ["Subtotal", f"{subtotal:,.2f}"], [f"Tax ({data.tax_rate:g} %)", f"{tax:,.2f}"]]
    rows.append(["Total due", f"{subtotal + tax:,.2f}"])
    totals: list[Flowable] = [Spacer(1, 4 * mm), table(rows, width, [0.8, 0.2])]
    return totals + ([para(data.notes)] if data.notes else [])


def _report(document: ReportDocument, width: float) -> list[list[Flowable]]:
    data = document.filled()
    first: list[Flowable] = [para(data.title, "Title")]
    if data.summary:
        first.append(para(data.summary, "Italic"))
    return fill_pages(first, document.pages, data.sections, lambda chunk: [f for s in chunk for f in _section(s)])


def _section(section: ReportSection) -> list[Flowable]:
    body: list[Flowable] = [para(section.heading, "Heading2"), *(para(text) for text in section.paragraphs)]
    return body + [para(f"\u2022 {item}") for item in section.bullets]


def _letter(document: LetterDocument, width: float) -> list[list[Flowable]]:
    data = document.filled()
    first: list[Flowable] = [para(data.sender), Spacer(1, 6 * mm), para(data.date), Spacer(1, 6 * mm)]
    first += [para(data.recipient), Spacer(1, 8 * mm)]
    if data.subject:
        first.append(para(data.subject, "Heading3"))
    first.append(para(data.salutation))
    stories = fill_pages(first, document.pages, data.paragraphs, lambda chunk: [para(text) for text in chunk])
    stories[-1] += [Spacer(1, 6 * mm), para(data.closing), Spacer(1, 12 * mm), para(data.signature)]
    return stories


def page_stories(document: TemplateDocument, width: float) -> list[list[Flowable]]:
    """The document's pages, each as its own story."""
    match document:
        case InvoiceDocument():
            return _invoice(document, width)
        case ReportDocument():
            return _report(document, width)
        case LetterDocument():
            return _letter(document, width)


def template_story(document: TemplateDocument, width: float) -> list[Flowable]:
    """The document's pages as one story, a page break between two pages."""
    story: list[Flowable] = []
    for number, page in enumerate(page_stories(document, width)):
        story += ([PageBreak()] if number else []) + page
    return story
