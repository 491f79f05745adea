"""`document`: a PDF, either laid out from a title and blocks (headings, paragraphs, bullet lists, tables) or
from a named template (invoice, report, letter) filled from `data`."""

import hashlib
from collections.abc import Mapping
from io import BytesIO
from typing import Any

from reportlab.lib.units import mm
from reportlab.platypus import Flowable, ListFlowable, Spacer

from app.handlers.base import JobContext, JobType
from app.handlers.document_templates import template_story
from app.handlers.pdf_layout import build, page_template, para, table
from app.schemas.payloads.document import SPEC, BulletsBlock, ContentDocument, DocumentPayload, TableBlock, TextBlock


def render_pdf(payload: dict[str, Any], dependencies: Mapping[str, Any] | None = None) -> tuple[bytes, int]:
    """The payload (a `DocumentPayload` as a dict) laid out as a PDF: its bytes and its page count. A content
    document that asks for them ends with its dependencies' results (`dependencies`, by ref)."""
    document = DocumentPayload.model_validate(payload).root
    out = BytesIO()
    if isinstance(document, ContentDocument):
        doc = page_template(out, document.page_size, document.title, document.author)
        story = _content_story(document, doc.width)
        if document.include_dependencies:
            story += _dependencies_story(dependencies or {}, doc.width)
        return build(doc, out, story)
    doc = page_template(out, document.page_size, document.title(), document.author)
    return build(doc, out, template_story(document, doc.width))


def _content_story(document: ContentDocument, width: float) -> list[Flowable]:
    story: list[Flowable] = [para(document.title, "Title")]
    for block in document.content:
        story += [_flowable(block, width), Spacer(1, 3 * mm)]
    return story


def _dependencies_story(dependencies: Mapping[str, Any], width: float) -> list[Flowable]:
    """A table of the dependencies' results: a row per dependency, its ref then its result's fields."""
    rows = [["Dependency", "Result"]]
    for ref, result in sorted(dependencies.items()):
        fields = result.items() if isinstance(result, dict) else [("result", result)]
        rows.append([ref, "; ".join(f"{key}: {value}" for key, value in fields)[:2000]])
    return [para("Results of its dependencies", "Heading2"), table(rows, width)]


def _flowable(block: TextBlock | BulletsBlock | TableBlock, width: float) -> Flowable:
    if isinstance(block, TextBlock):
        return para(block.text, "Heading2" if block.type == "heading" else "BodyText")
    if isinstance(block, BulletsBlock):
        return ListFlowable([para(item) for item in block.items], bulletType="bullet", start="\u2022", leftIndent=12)
    return table(block.rows, width)


async def handle(ctx: JobContext, payload: DocumentPayload) -> dict[str, Any]:
    tools = ctx.require_tools()
    # each page begun is reported (pdf_layout.build), then the whole once it is saved
    data, pages = await tools.cpu(render_pdf, payload.model_dump(), dict(ctx.dependencies), progress=ctx.progress_sink)
    url = await tools.save_artifact(ctx.job_id, data, "application/pdf", "document.pdf")
    await ctx.progress(1.0, f"{pages} pages")
    return {"pages": pages, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(), "artifact_url": url}


JOB_TYPE = JobType(SPEC, handle)
