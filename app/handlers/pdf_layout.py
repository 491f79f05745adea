"""What every PDF of the `document` type shares: page sizes, escaped text, tables, the footer, and the build."""

import re
from io import BytesIO
from xml.sax.saxutils import escape

from reportlab.lib import colors
from reportlab.lib.pagesizes import A4, letter
from reportlab.lib.styles import ParagraphStyle, StyleSheet1, getSampleStyleSheet
from reportlab.lib.units import mm
from reportlab.pdfgen.canvas import Canvas
from reportlab.platypus import Flowable, Paragraph, SimpleDocTemplate, Table
from reportlab.platypus.doctemplate import LayoutError

from app.core import cpu_reports
from app.handlers.errors import PermanentError
from app.schemas.payloads.document_templates import PageSize

PAGE_SIZES = {"A4": A4, "letter": letter}
MARGIN = 20 * mm
# C0 controls other than tab and newline: the standard fonts have no glyph for them and draw boxes.
CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
STYLES: StyleSheet1 = getSampleStyleSheet()


def markup(text: str) -> str:
    """The user's text for a Paragraph, which parses a little XML: escaped, with its line breaks kept."""
    return escape(CONTROL_CHARS.sub("", text)).replace("\n", "<br/>")


def para(text: str, style: str = "BodyText") -> Paragraph:
    """A paragraph of the user's text in one of ReportLab's sample styles."""
    return Paragraph(markup(text), STYLES[style])


def table(rows: list[list[str]], width: float, widths: list[float] | None = None) -> Table:
    """A grid whose first row is a header, repeated on every page it runs over."""
    # Cells are Paragraphs so long text wraps inside its column instead of running off the page.
    header = ParagraphStyle("TableHeader", parent=STYLES["BodyText"], fontName="Helvetica-Bold")
    cells = [
        [Paragraph(markup(cell), header if i == 0 else STYLES["BodyText"]) for cell in row]
        for i, row in enumerate(rows)
    ]
    columns = len(rows[0])
    col_widths = [width * share for share in widths] if widths else [width / columns] * columns
    grid = Table(cells, colWidths=col_widths, repeatRows=1, splitInRow=1)
    grid.setStyle(
        [
            ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#dde3ea")),
            ("GRID", (0, 0), (-1, -1), 0.5, colors.grey),
            ("VALIGN", (0, 0), (-1, -1), "TOP"),
        ]
    )
    return grid


def page_template(out: BytesIO, page_size: PageSize, title: str, author: str | None) -> SimpleDocTemplate:
    """The page layout every document uses: the size asked for, 20 mm margins, title and author in the metadata."""
    return SimpleDocTemplate(
        out,
        pagesize=PAGE_SIZES[page_size],
        title=title,
        author=author or "",  # not ReportLab's "(anonymous)"
        creator="taskq",
        leftMargin=MARGIN,
        rightMargin=MARGIN,
        topMargin=MARGIN,
        bottomMargin=MARGIN,
    )


def build(doc: SimpleDocTemplate, out: BytesIO, story: list[Flowable]) -> tuple[bytes, int]:
    """Lay the story out with a page number in each footer: the PDF's bytes and its page count. Each page begun
    is reported (cpu_reports) with the share of the story laid out before it: the build takes flowables off the
    story as it places them, and the page count is not known before the end."""
    total = max(len(story), 1)

    def page(canvas: Canvas, doc: SimpleDocTemplate) -> None:
        _footer(canvas, doc)
        cpu_reports.report(min((total - len(story)) / total, 1.0), f"page {canvas.getPageNumber()}")

    try:
        doc.build(story, onFirstPage=page, onLaterPages=page)
    except LayoutError as exc:
        # Crosses a process boundary: only a plain, picklable error with a sentence goes back.
        raise PermanentError(f"the document cannot be laid out: {exc}") from None
    return out.getvalue(), doc.page


def _footer(canvas: Canvas, doc: SimpleDocTemplate) -> None:
    canvas.saveState()
    canvas.setFont("Helvetica", 9)
    canvas.drawCentredString(doc.pagesize[0] / 2, MARGIN / 2, f"Page {canvas.getPageNumber()}")
    canvas.restoreState()
