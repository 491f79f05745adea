"""`document`: a PDF, either laid out from a title and blocks (headings, paragraphs, bullet lists, tables) or
from a named template (invoice, report, letter) filled from `data`."""

import hashlib
from io import BytesIO
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, RootModel, Tag, model_validator
from reportlab.lib.units import mm
from reportlab.platypus import Flowable, ListFlowable, Spacer

from app.handlers.base import JobContext, JobType
from app.handlers.document_templates import InvoiceDocument, LetterDocument, ReportDocument, template_story
from app.handlers.pdf_layout import PageSize, build, page_template, para, table
from app.schemas.requests import REQUEST_CONFIG

MAX_COLUMNS = 12  # narrower columns than this on a portrait page wrap a word or two per line
TEMPLATES = ("invoice", "report", "letter")
EXPLICIT = "content"  # the union's tag for a document given as title + content


class TextBlock(BaseModel):
    model_config = REQUEST_CONFIG

    type: Literal["heading", "paragraph"]
    text: str = Field(max_length=10_000)


ShortText = Annotated[str, Field(max_length=2000)]
Row = Annotated[list[ShortText], Field(min_length=1, max_length=MAX_COLUMNS)]


class BulletsBlock(BaseModel):
    model_config = REQUEST_CONFIG

    type: Literal["bullets"]
    items: list[ShortText] = Field(min_length=1, max_length=200)


class TableBlock(BaseModel):
    model_config = REQUEST_CONFIG

    type: Literal["table"]
    rows: list[Row] = Field(
        min_length=1, max_length=500, description="The first row is the header; every row has the same length."
    )

    @model_validator(mode="after")
    def _rectangular(self) -> "TableBlock":
        width = len(self.rows[0])
        for number, row in enumerate(self.rows[1:], start=2):
            if len(row) != width:
                raise ValueError(f"every table row needs {width} cells, like the header; row {number} has {len(row)}")
        return self


Block = Annotated[TextBlock | BulletsBlock | TableBlock, Field(discriminator="type")]


class ContentDocument(BaseModel):
    """A document laid out from its title and blocks, as many pages as they take."""

    model_config = REQUEST_CONFIG

    title: str = Field(min_length=1, max_length=200)
    content: list[Block] = Field(min_length=1, max_length=500)
    author: str | None = Field(default=None, max_length=200)
    page_size: PageSize = "A4"

    def story(self, width: float) -> list[Flowable]:
        story: list[Flowable] = [para(self.title, "Title")]
        for block in self.content:
            story += [_flowable(block, width), Spacer(1, 3 * mm)]
        return story


def _kind(value: Any) -> str | None:
    # A payload with `template` names its layout; one without (or not an object at all) is the title + content form,
    # whose own errors then say what is missing.
    if isinstance(value, dict):
        template = value.get("template", EXPLICIT)
        return template if isinstance(template, str) else None
    return getattr(value, "template", EXPLICIT)


AnyDocument = Annotated[
    Annotated[ContentDocument, Tag(EXPLICIT)]
    | Annotated[InvoiceDocument, Tag("invoice")]
    | Annotated[ReportDocument, Tag("report")]
    | Annotated[LetterDocument, Tag("letter")],
    Discriminator(
        _kind,
        custom_error_type="unknown_template",
        custom_error_message="`template` must be invoice, report or letter; or leave it out and give title and content",
    ),
]


class DocumentPayload(RootModel[AnyDocument]):
    """Either `title` + `content` (blocks laid out in order), or a named `template` (invoice, report, letter)
    filled from `data`, or from sample data when `data` is absent, over `pages` pages."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"template": "invoice", "pages": 3},
                {"template": "letter", "data": {"recipient": "Ms Jane Doe", "paragraphs": ["Your order ships today."]}},
                {"title": "Monthly Invoice", "content": [{"type": "heading", "text": "Invoice #12345"}]},
            ]
        }
    )


UNION_TAGS = frozenset((EXPLICIT, *TEMPLATES))


def render_pdf(payload: dict[str, Any]) -> tuple[bytes, int]:
    """The payload (a `DocumentPayload` as a dict) laid out as a PDF: its bytes and its page count."""
    document = DocumentPayload.model_validate(payload).root
    out = BytesIO()
    if isinstance(document, ContentDocument):
        doc = page_template(out, document.page_size, document.title, document.author)
        return build(doc, out, document.story(doc.width))
    doc = page_template(out, document.page_size, document.title(), document.author)
    return build(doc, out, template_story(document, doc.width))


def _flowable(block: TextBlock | BulletsBlock | TableBlock, width: float) -> Flowable:
    if isinstance(block, TextBlock):
        return para(block.text, "Heading2" if block.type == "heading" else "BodyText")
    if isinstance(block, BulletsBlock):
        return ListFlowable([para(item) for item in block.items], bulletType="bullet", start="\u2022", leftIndent=12)
    return table(block.rows, width)


async def handle(ctx: JobContext, payload: DocumentPayload) -> dict[str, Any]:
    tools = ctx.require_tools()
    data, pages = await tools.cpu(render_pdf, payload.model_dump())
    url = await tools.save_artifact(ctx.job_id, data, "application/pdf", "document.pdf")
    return {"pages": pages, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(), "artifact_url": url}


JOB_TYPE = JobType(
    "document",
    DocumentPayload,
    handle,
    "A PDF artifact: headings, paragraphs, bullet lists and tables laid out from `title` + `content`, or a named "
    "`template` (invoice, report, letter) filled from `data` over `pages` pages.",
    union_tags=UNION_TAGS,
)
