"""The named layouts of the `document` type: an invoice, a report and a letter, each filled from `data` (or from
sample data when there is none) and spread over the pages asked for."""

from collections.abc import Callable
from typing import Annotated, Literal, TypeVar

from pydantic import BaseModel, Field
from reportlab.lib.units import mm
from reportlab.platypus import Flowable, PageBreak, Spacer

from app.handlers.pdf_layout import PageSize, para, table
from app.schemas.requests import REQUEST_CONFIG, WholeNumber

T = TypeVar("T")
MAX_PAGES = 50
BLANK = "This page is intentionally left blank."
LongText = Annotated[str, Field(max_length=10_000)]
ShortText = Annotated[str, Field(max_length=2000)]


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


class TemplateFields(BaseModel):
    """What every named template takes besides its `data`."""

    model_config = REQUEST_CONFIG

    pages: WholeNumber = Field(
        default=1, ge=1, le=MAX_PAGES, description="Pages the document has; more only when `data` does not fit."
    )
    author: str | None = Field(default=None, max_length=200)
    page_size: PageSize = "A4"


class InvoiceLine(BaseModel):
    model_config = REQUEST_CONFIG

    description: str = Field(min_length=1, max_length=500)
    quantity: float = Field(gt=0, le=1_000_000)
    unit_price: float = Field(ge=0, le=1_000_000_000)


class InvoiceData(BaseModel):
    model_config = REQUEST_CONFIG

    number: str = Field(default="INV-0001", min_length=1, max_length=64)
    issued: str = Field(default="2026-01-15", max_length=64, description="The issue date, as it should read.")
    due: str | None = Field(default="2026-02-14", max_length=64)
    seller: str = Field(default="Example Supplies Ltd\n1 Market Street\nSpringfield", max_length=500)
    customer: str = Field(default="Acme Corporation\n42 Harbour Road\nShelbyville", max_length=500)
    currency: str = Field(default="EUR", min_length=1, max_length=8)
    lines: list[InvoiceLine] = Field(min_length=1, max_length=500)
    tax_rate: float = Field(default=0, ge=0, le=100, description="Percent added to the subtotal.")
    notes: str | None = Field(default=None, max_length=2000)


class InvoiceDocument(TemplateFields):
    """An invoice: seller and customer, its lines over the pages, and the totals on the last one."""

    template: Literal["invoice"]
    data: InvoiceData | None = Field(default=None, description="The invoice; sample data when absent.")

    def title(self) -> str:
        return f"Invoice {self.filled().number}"

    def filled(self) -> InvoiceData:
        if self.data is not None:
            return self.data
        lines = [
            InvoiceLine(description=f"Consulting, week {n}", quantity=8, unit_price=95)
            for n in range(1, 1 + 6 * self.pages)
        ]
        return InvoiceData(lines=lines, tax_rate=20, notes="Payable within 30 days. Thank you for your business.")

    def page_stories(self, width: float) -> list[list[Flowable]]:
        data = self.filled()
        first: list[Flowable] = [
            para(self.title(), "Title"),
            table([["From", "Bill to"], [data.seller, data.customer]], width),
            para(f"Issued: {data.issued}" + (f"    Due: {data.due}" if data.due else "")),
        ]
        heading = f"{self.title()} (continued)"
        stories = fill_pages(
            first, self.pages, data.lines, lambda chunk: [self._lines(chunk, data.currency, width)], heading
        )
        stories[-1].extend(self._totals(data, width))
        return stories

    @staticmethod
    def _lines(lines: list[InvoiceLine], currency: str, width: float) -> Flowable:
        rows = [["Description", "Quantity", f"Unit price ({currency})", f"Amount ({currency})"]]
        rows += [
            [n.description, f"{n.quantity:g}", f"{n.unit_price:,.2f}", f"{n.quantity * n.unit_price:,.2f}"]
            for n in lines
        ]
        return table(rows, width, [0.46, 0.14, 0.2, 0.2])

    @staticmethod
    def _totals(data: InvoiceData, width: float) -> list[Flowable]:
        subtotal = sum(n.quantity * n.unit_price for n in data.lines)
        tax = subtotal * data.tax_rate / 100
        rows = [["", data.currency], ["Subtotal", f"{subtotal:,.2f}"], [f"Tax ({data.tax_rate:g} %)", f"{tax:,.2f}"]]
        rows.append(["Total due", f"{subtotal + tax:,.2f}"])
        totals: list[Flowable] = [Spacer(1, 4 * mm), table(rows, width, [0.8, 0.2])]
        return totals + ([para(data.notes)] if data.notes else [])


class ReportSection(BaseModel):
    model_config = REQUEST_CONFIG

    heading: str = Field(min_length=1, max_length=200)
    paragraphs: list[LongText] = Field(default_factory=list, max_length=50)
    bullets: list[ShortText] = Field(default_factory=list, max_length=200)


class ReportData(BaseModel):
    model_config = REQUEST_CONFIG

    title: str = Field(default="Quarterly report", min_length=1, max_length=200)
    summary: str | None = Field(default=None, max_length=10_000)
    sections: list[ReportSection] = Field(min_length=1, max_length=200)


class ReportDocument(TemplateFields):
    """A report: its title and summary first, then its sections spread over the pages."""

    template: Literal["report"]
    data: ReportData | None = Field(default=None, description="The report; sample data when absent.")

    def title(self) -> str:
        return self.filled().title

    def filled(self) -> ReportData:
        if self.data is not None:
            return self.data
        sections = [
            ReportSection(
                heading=f"{n}. Findings, part {n}",
                paragraphs=["Throughput held steady while the error rate fell by a third.", "Costs stayed on plan."],
                bullets=["Latency within target", "No incidents", "Two releases shipped"],
            )
            for n in range(1, 1 + self.pages)
        ]
        return ReportData(summary="Work went to plan this quarter; the details follow.", sections=sections)

    def page_stories(self, width: float) -> list[list[Flowable]]:
        data = self.filled()
        first: list[Flowable] = [para(data.title, "Title")]
        if data.summary:
            first.append(para(data.summary, "Italic"))
        return fill_pages(first, self.pages, data.sections, lambda chunk: [f for s in chunk for f in self._section(s)])

    @staticmethod
    def _section(section: ReportSection) -> list[Flowable]:
        body: list[Flowable] = [para(section.heading, "Heading2"), *(para(text) for text in section.paragraphs)]
        return body + [para(f"\u2022 {item}") for item in section.bullets]


class LetterData(BaseModel):
    model_config = REQUEST_CONFIG

    sender: str = Field(default="Example Supplies Ltd\n1 Market Street\nSpringfield", max_length=500)
    recipient: str = Field(default="Ms Jane Doe\nAcme Corporation\n42 Harbour Road\nShelbyville", max_length=500)
    date: str = Field(default="15 January 2026", max_length=64)
    subject: str | None = Field(default=None, max_length=200)
    salutation: str = Field(default="Dear Ms Doe,", max_length=200)
    paragraphs: list[LongText] = Field(min_length=1, max_length=200)
    closing: str = Field(default="Yours sincerely,", max_length=200)
    signature: str = Field(default="John Smith", max_length=200)


class LetterDocument(TemplateFields):
    """A letter: sender, date, recipient and subject, its paragraphs over the pages, the signature last."""

    template: Literal["letter"]
    data: LetterData | None = Field(default=None, description="The letter; sample data when absent.")

    def title(self) -> str:
        return self.filled().subject or "Letter"

    def filled(self) -> LetterData:
        if self.data is not None:
            return self.data
        text = "Thank you for your order. We are glad to confirm that it ships this week, as agreed on the phone."
        paragraphs = [f"{text} (Paragraph {n}.)" for n in range(1, 1 + 3 * self.pages)]
        return LetterData(subject="Your order", paragraphs=paragraphs)

    def page_stories(self, width: float) -> list[list[Flowable]]:
        data = self.filled()
        first: list[Flowable] = [para(data.sender), Spacer(1, 6 * mm), para(data.date), Spacer(1, 6 * mm)]
        first += [para(data.recipient), Spacer(1, 8 * mm)]
        if data.subject:
            first.append(para(data.subject, "Heading3"))
        first.append(para(data.salutation))
        stories = fill_pages(first, self.pages, data.paragraphs, lambda chunk: [para(text) for text in chunk])
        stories[-1] += [Spacer(1, 6 * mm), para(data.closing), Spacer(1, 12 * mm), para(data.signature)]
        return stories


TemplateDocument = InvoiceDocument | ReportDocument | LetterDocument


def template_story(document: TemplateDocument, width: float) -> list[Flowable]:
    """The document's pages as one story, a page break between two pages."""
    story: list[Flowable] = []
    for number, page in enumerate(document.page_stories(width)):
        story += ([PageBreak()] if number else []) + page
    return story
