"""Progress from the CPU pool's processes: a PDF reports each page it begins and an image each operation it has
done, over the pool's pipe, before the outcome; the pool takes its next run as before; outside a pool process a
report goes nowhere."""

import io
from collections.abc import AsyncIterator

import pytest
from PIL import Image

from app.core import cpu_reports
from app.handlers.base import ProgressSink
from app.handlers.document import render_pdf
from app.handlers.image import transform_image
from app.workers.jobs.cpu_pool import CpuPool

Reports = list[tuple[float, str | None]]


@pytest.fixture
async def pool() -> AsyncIterator[CpuPool]:
    pool = CpuPool(1)
    yield pool
    pool.close()


def sink(into: Reports) -> ProgressSink:
    return lambda fraction, message: into.append((fraction, message))


def png(width: int, height: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), "red").save(out, "PNG")
    return out.getvalue()


async def test_a_pdf_reports_each_page_it_begins_then_the_pool_runs_the_next_job(pool: CpuPool) -> None:
    reports: Reports = []
    data, pages = await pool.run(render_pdf, {"template": "report", "pages": 3}, {}, progress=sink(reports))

    assert pages == 3 and data.startswith(b"%PDF")
    assert [message for _, message in reports] == ["page 1", "page 2", "page 3"]
    fractions = [fraction for fraction, _ in reports]
    assert fractions == sorted(fractions) and all(0 <= f <= 1 for f in fractions)
    again, more = await pool.run(render_pdf, {"title": "t", "content": [{"type": "paragraph", "text": "x"}]}, {})
    assert more == 1 and again.startswith(b"%PDF")  # no report asked for: none kept, the outcome as ever


async def test_an_image_reports_each_operation_as_a_share_of_them_and_its_save(pool: CpuPool) -> None:
    reports: Reports = []
    operations = ["resize", "grayscale", "rotate"]
    options = (32, 32, "PNG", None, 90)

    _, width, height, fmt = await pool.run(transform_image, png(64, 48), operations, *options, progress=sink(reports))

    assert (width, height, fmt) == (32, 32, "PNG")
    assert reports == [(0.25, "resize"), (0.5, "grayscale"), (0.75, "rotate")]


def test_outside_a_pool_process_a_report_goes_nowhere_and_a_bad_fraction_is_refused() -> None:
    cpu_reports.report(0.5, "half")  # no pipe here: nothing happens
    with pytest.raises(ValueError, match="from 0 to 1"):
        cpu_reports.report(1.5)
