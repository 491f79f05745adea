"""`document`'s payload: a title and blocks laid out in order, or a named template filled from `data`."""

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, RootModel, Tag, model_validator

from app.schemas.payloads.base import PayloadSpec
from app.schemas.payloads.document_templates import InvoiceDocument, LetterDocument, PageSize, ReportDocument
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
    include_dependencies: bool = Field(
        default=False,
        description="In a workflow: end with a table of the results of the jobs this one depends on, a row per "
        "dependency (its ref, then each field of its result), so one report can gather a fan-out's results.",
    )


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


SPEC = PayloadSpec(
    "document",
    DocumentPayload,
    "A PDF artifact: headings, paragraphs, bullet lists and tables laid out from `title` + `content`, or a named "
    "`template` (invoice, report, letter) filled from `data` over `pages` pages.",
    union_tags=UNION_TAGS,
)
