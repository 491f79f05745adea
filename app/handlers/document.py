"""`document`: lays out a titled document of headings, paragraphs, bullet lists and tables as a PDF."""

import hashlib
import re
from io import BytesIO
from typing import Annotated, Any, Literal
from xml.sax.saxutils import escape

from pydantic import BaseModel, ConfigDict, Field, model_validator
from reportlab.lib import colors
from reportlab.lib.pagesizes import A4, letter
from reportlab.lib.styles import ParagraphStyle, StyleSheet1, getSampleStyleSheet
from reportlab.lib.units import mm
from reportlab.pdfgen.canvas import Canvas
from reportlab.platypus import Flowable, ListFlowable, Paragraph, SimpleDocTemplate, Spacer, Table
from reportlab.platypus.doctemplate import LayoutError

from app.handlers.base import JobContext, JobType
from app.handlers.errors import PermanentError

PAGE_SIZES = {"A4": A4, "letter": letter}
MARGIN = 20 * mm
MAX_COLUMNS = 12  # narrower columns than this on a portrait page wrap a word or two per line
# C0 controls other than tab and newline: the standard fonts have no glyph for them and draw boxes.
CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


class TextBlock(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["heading", "paragraph"]
    text: str = Field(max_length=10_000)


ShortText = Annotated[str, Field(max_length=2000)]
Row = Annotated[list[ShortText], Field(min_length=1, max_length=MAX_COLUMNS)]


class BulletsBlock(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["bullets"]
    items: list[ShortText] = Field(min_length=1, max_length=200)


class TableBlock(BaseModel):
    model_config = ConfigDict(extra="forbid")

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


class DocumentPayload(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str = Field(min_length=1, max_length=200)
    content: list[Block] = Field(min_length=1, max_length=500)
    author: str | None = Field(default=None, max_length=200)
    page_size: Literal["A4", "letter"] = "A4"


def render_pdf(payload: dict[str, Any]) -> tuple[bytes, int]:
    """The payload (a `DocumentPayload` as a dict) laid out as a PDF: its bytes and its page count."""
    out = BytesIO()
    doc = SimpleDocTemplate(
        out,
        pagesize=PAGE_SIZES[payload["page_size"]],
        title=payload["title"],
        author=payload.get("author") or "",  # not ReportLab's "(anonymous)"
        creator="taskq",
        leftMargin=MARGIN,
        rightMargin=MARGIN,
        topMargin=MARGIN,
        bottomMargin=MARGIN,
    )
    styles = getSampleStyleSheet()
    story: list[Flowable] = [Paragraph(_markup(payload["title"]), styles["Title"])]
    for block in payload["content"]:
        story.append(_flowable(block, styles, doc.width))
        story.append(Spacer(1, 3 * mm))
    try:
        doc.build(story, onFirstPage=_footer, onLaterPages=_footer)
    except LayoutError as exc:
        # Crosses a process boundary: only a plain, picklable error with a sentence goes back.
        raise PermanentError(f"the document cannot be laid out: {exc}") from None
    return out.getvalue(), doc.page


def _flowable(block: dict[str, Any], styles: StyleSheet1, width: float) -> Flowable:
    kind = block["type"]
    if kind == "heading":
        return Paragraph(_markup(block["text"]), styles["Heading2"])
    if kind == "paragraph":
        return Paragraph(_markup(block["text"]), styles["BodyText"])
    if kind == "bullets":
        items = [Paragraph(_markup(item), styles["BodyText"]) for item in block["items"]]
        return ListFlowable(items, bulletType="bullet", start="\u2022", leftIndent=12)
    return _table(block["rows"], styles, width)


def _table(rows: list[list[str]], styles: StyleSheet1, width: float) -> Table:
    # Cells are Paragraphs so long text wraps inside its column instead of running off the page.
    header = ParagraphStyle("TableHeader", parent=styles["BodyText"], fontName="Helvetica-Bold")
    cells = [
        [Paragraph(_markup(cell), header if i == 0 else styles["BodyText"]) for cell in row]
        for i, row in enumerate(rows)
    ]
    columns = len(rows[0])
    table = Table(cells, colWidths=[width / columns] * columns, repeatRows=1, splitInRow=1)
    table.setStyle(
        [
            ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#dde3ea")),
            ("GRID", (0, 0), (-1, -1), 0.5, colors.grey),
            ("VALIGN", (0, 0), (-1, -1), "TOP"),
        ]
    )
    return table


def _markup(text: str) -> str:
    # Paragraph parses a little XML: escape the user's text, and keep its line breaks.
    return escape(CONTROL_CHARS.sub("", text)).replace("\n", "<br/>")


def _footer(canvas: Canvas, doc: SimpleDocTemplate) -> None:
    canvas.saveState()
    canvas.setFont("Helvetica", 9)
    canvas.drawCentredString(doc.pagesize[0] / 2, MARGIN / 2, f"Page {canvas.getPageNumber()}")
    canvas.restoreState()


async def handle(ctx: JobContext, payload: DocumentPayload) -> dict[str, Any]:
    tools = ctx.require_tools()
    data, pages = await tools.cpu(render_pdf, payload.model_dump())
    url = await tools.save_artifact(ctx.job_id, data, "application/pdf", "document.pdf")
    return {"pages": pages, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(), "artifact_url": url}


JOB_TYPE = JobType(
    "document", DocumentPayload, handle, "Lays out headings, paragraphs, bullet lists and tables as a PDF artifact."
)
