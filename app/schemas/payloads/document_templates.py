"""The named layouts of the `document` type's payload: an invoice, a report and a letter, each filled from `data`
(or from sample data when there is none) over the pages asked for."""

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from app.schemas.requests import REQUEST_CONFIG, WholeNumber

MAX_PAGES = 50
LongText = Annotated[str, Field(max_length=10_000)]
ShortText = Annotated[str, Field(max_length=2000)]
PageSize = Literal["A4", "letter"]


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


TemplateDocument = InvoiceDocument | ReportDocument | LetterDocument
