"""The design documents' example submissions, read from docs/job-types.md and sent as written to a live service
(only their URLs' hosts are swapped for a local receiver): each job succeeds with what its example promises."""

import io
import json
import re
from typing import Any
from urllib.parse import urlsplit

import pytest
from PIL import Image
from pypdf import PdfReader
from standardwebhooks.webhooks import Webhook
from starlette.responses import Response

from app.workers.jobs.worker import JobWorker
from tests.receiver import Receiver
from tests.support import ROOT, Api, until_status

EXAMPLE = re.compile(r"<!-- example: ([a-z-]+) -->\n```json\n(.*?)\n```", re.DOTALL)


def examples() -> dict[str, dict[str, Any]]:
    page = (ROOT / "docs" / "job-types.md").read_text()
    return {name: json.loads(body) for name, body in EXAMPLE.findall(page)}


def local(url: str, receiver: Receiver) -> str:
    """The same URL path, on the test's receiver."""
    return receiver.url(urlsplit(url).path)


def jpeg(width: int, height: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (20, 120, 200)).save(out, "JPEG")
    return out.getvalue()


async def run(api: Api, headers: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
    answer = await api.client.post("/api/v1/jobs", json=body, headers=headers)
    assert answer.status_code == 201, answer.text
    done = await until_status(api, headers, answer.json()["id"], 60)
    assert done["status"] == "succeeded", done["error"]
    return done


async def pdf_of(api: Api, headers: dict[str, str], job_id: str) -> PdfReader:
    answer = await api.client.get(f"/api/v1/jobs/{job_id}/artifact", headers=headers)
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/pdf"
    return PdfReader(io.BytesIO(answer.content))


def test_the_page_shows_every_example() -> None:
    assert set(examples()) == {"invoice-template", "image", "pdf", "webhook"}


async def test_the_invoice_template_example_makes_a_three_page_pdf(api: Api, worker: JobWorker) -> None:
    headers = await api.new_client("examples-invoice")
    body = examples()["invoice-template"]
    assert body == {"job_type": "document", "payload": {"template": "invoice", "pages": 3}}

    done = await run(api, headers, body)

    reader = await pdf_of(api, headers, done["id"])
    assert len(reader.pages) == done["result"]["pages"] == 3
    assert "Invoice INV-0001" in reader.pages[0].extract_text()


async def test_the_pdf_example_lays_out_its_blocks(api: Api, worker: JobWorker) -> None:
    headers = await api.new_client("examples-pdf")

    done = await run(api, headers, examples()["pdf"])

    reader = await pdf_of(api, headers, done["id"])
    text = reader.pages[0].extract_text()
    assert len(reader.pages) == done["result"]["pages"] == 1
    for expected in ("Monthly Invoice", "Invoice #12345", "Amount due: $1,250.00", "Due date: April 30, 2026"):
        assert expected in text
    assert reader.metadata is not None and reader.metadata.author == "Billing System"


async def test_the_image_example_resizes_and_compresses(api: Api, worker: JobWorker, receiver: Receiver) -> None:
    headers = await api.new_client("examples-image")
    body = examples()["image"]
    body["payload"]["image_url"] = local(body["payload"]["image_url"], receiver)
    receiver.answer = lambda _: Response(content=jpeg(1280, 960), media_type="image/jpeg")

    done = await run(api, headers, body)

    assert [r.path for r in receiver.requests] == ["/photo.jpg"]
    assert (done["result"]["width"], done["result"]["height"], done["result"]["format"]) == (640, 480, "JPEG")
    artifact = await api.client.get(f"/api/v1/jobs/{done['id']}/artifact", headers=headers)
    with Image.open(io.BytesIO(artifact.content)) as made:
        assert (made.size, made.format) == ((640, 480), "JPEG")


async def test_the_webhook_example_is_a_signed_call(api: Api, worker: JobWorker, receiver: Receiver) -> None:
    headers = await api.new_client("examples-webhook")
    body = examples()["webhook"]
    secret = body["payload"]["secret"]
    body["payload"]["url"] = local(body["payload"]["url"], receiver)

    done = await run(api, headers, body)

    [request] = receiver.on("/webhooks")
    assert json.loads(request.body) == {"event": "payment.succeeded", "amount": 1250}
    assert request.headers["x-custom-header"] == "value"
    Webhook(secret).verify(request.body, request.headers)
    assert (done["priority"], done["result"]["status_code"]) == (1, 200)


@pytest.mark.parametrize(
    ("payload", "loc"),
    [
        ({"template": "invoice", "pages": 0}, ["body", "payload", "pages"]),
        ({"template": "letter", "data": {"paragraphs": []}}, ["body", "payload", "data", "paragraphs"]),
        ({"template": "poster"}, ["body", "payload"]),
    ],
)
async def test_a_bad_template_is_a_422_naming_the_field(api: Api, payload: dict[str, Any], loc: list[str]) -> None:
    headers = await api.new_client("examples-422")
    answer = await api.submit(headers, job_type="document", payload=payload)
    assert answer.status_code == 422
    assert [error["loc"] for error in answer.json()["errors"]] == [loc]
