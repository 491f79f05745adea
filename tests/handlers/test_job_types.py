"""The real job types end to end: document (PDF), image (Pillow), notification (signed HTTP), with artifacts."""

import base64
import io
import itertools
import json
from datetime import datetime
from typing import Any

import pytest
from PIL import Image
from pypdf import PdfReader
from standardwebhooks.webhooks import Webhook
from starlette.responses import Response

from app.workers.jobs.worker import JobWorker
from tests.receiver import Received, Receiver
from tests.support import Api, trail, until_status


def png(width: int, height: int, color: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, "PNG")
    return out.getvalue()


async def artifact(api: Api, headers: dict[str, str], job_id: str) -> tuple[bytes, dict[str, str]]:
    answer = await api.client.get(f"/api/v1/jobs/{job_id}/artifact", headers=headers)
    assert answer.status_code == 200, answer.text
    return answer.content, dict(answer.headers)


async def test_document_makes_a_pdf_with_every_block_on_both_page_sizes(api: Api, worker: JobWorker) -> None:
    headers = await api.new_client("types-doc")
    content = [
        {"type": "heading", "text": "Summary"},
        {"type": "paragraph", "text": "Orders & <returns> for November."},
        {"type": "bullets", "items": ["first", "second"]},
        {"type": "table", "rows": [["sku", "qty"], ["A-1", "3"], ["B-2", "5"]]},
    ] + [{"type": "paragraph", "text": f"Line {n} " * 40} for n in range(60)]
    sizes = {"A4": (595, 842), "letter": (612, 792)}
    for page_size, (width, height) in sizes.items():
        payload = {"title": f"Report {page_size}", "content": content, "author": "Ops", "page_size": page_size}
        job = (await api.submit(headers, job_type="document", payload=payload)).json()
        done = await until_status(api, headers, job["id"], 60)
        assert done["status"] == "succeeded", done["error"]
        data, answer_headers = await artifact(api, headers, job["id"])
        assert answer_headers["content-type"] == "application/pdf"
        assert "document.pdf" in answer_headers["content-disposition"]
        reader = PdfReader(io.BytesIO(data))
        assert len(reader.pages) == done["result"]["pages"] > 1
        assert done["result"]["bytes"] == len(data) and done["result"]["artifact_url"].endswith("/artifact")
        first = reader.pages[0].extract_text()
        assert f"Report {page_size}" in first and "Orders & <returns>" in first and "A-1" in first
        assert (round(float(reader.pages[0].mediabox.width)), round(float(reader.pages[0].mediabox.height))) == (
            width,
            height,
        )
        assert reader.metadata is not None and reader.metadata.title == f"Report {page_size}"


async def test_image_from_base64_and_from_a_url(api: Api, worker: JobWorker, receiver: Receiver) -> None:
    headers = await api.new_client("types-image")
    source = png(400, 200)
    by_base64 = {
        "image_base64": base64.b64encode(source).decode(),
        "operations": ["resize", "grayscale", "convert"],
        "width": 100,
        "format": "JPEG",
    }
    receiver.answer = lambda _: Response(content=source, media_type="image/png")
    by_url = {
        "image_url": receiver.url("/photo.png"),
        "operations": ["thumbnail", "convert"],
        "width": 64,
        "format": "WEBP",
    }
    expected = [((100, 50), "JPEG", "image/jpeg"), ((64, 32), "WEBP", "image/webp")]
    for payload, (size, fmt, content_type) in zip((by_base64, by_url), expected, strict=True):
        job = (await api.submit(headers, job_type="image", payload=payload)).json()
        done = await until_status(api, headers, job["id"], 60)
        assert done["status"] == "succeeded", done["error"]
        data, answer_headers = await artifact(api, headers, job["id"])
        assert answer_headers["content-type"] == content_type
        with Image.open(io.BytesIO(data)) as made:
            assert (made.size, made.format) == (size, fmt)
        assert (done["result"]["width"], done["result"]["height"], done["result"]["format"]) == (*size, fmt)
    assert len(receiver.on("/photo.png")) == 1


async def test_a_decompression_bomb_and_a_text_file_die_after_one_attempt(
    api: Api, worker: JobWorker, receiver: Receiver
) -> None:
    headers = await api.new_client("types-bomb")
    bomb = io.BytesIO()
    Image.new("1", (12000, 12000)).save(bomb, "PNG")  # 144 M pixels in a few kilobytes
    receiver.answer = lambda _: Response(content=b"just words", media_type="image/png")
    cases = [
        {"image_base64": base64.b64encode(bomb.getvalue()).decode(), "operations": ["grayscale"]},
        {"image_url": receiver.url("/not-an-image.png"), "operations": ["grayscale"]},
    ]
    for payload in cases:
        job = (await api.submit(headers, job_type="image", payload=payload, max_retries=3)).json()
        done = await until_status(api, headers, job["id"], 60)
        assert (done["status"], done["attempts"], done["error"]["type"]) == ("dead_lettered", 1, "PermanentError")
    assert (await api.client.get(f"/api/v1/jobs/{job['id']}/artifact", headers=headers)).status_code == 404


async def test_notification_is_signed_and_maps_answers_to_retries(
    api: Api, worker: JobWorker, receiver: Receiver
) -> None:
    headers = await api.new_client("types-notify")
    secret = "whsec_" + base64.b64encode(b"n" * 32).decode()

    def answer(request: Received) -> Response:
        codes = {"/ok": 200, "/missing": 404, "/down": 503}
        return Response(status_code=codes.get(request.path, 200))

    receiver.answer = answer
    receiver.delays["/slow"] = 3
    ok = (
        await api.submit(
            headers,
            job_type="notification",
            payload={"url": receiver.url("/ok"), "body": {"order": 7}, "secret": secret, "headers": {"X-Tenant": "t1"}},
        )
    ).json()
    done = await until_status(api, headers, ok["id"], 30)
    assert done["status"] == "succeeded" and done["result"]["status_code"] == 200
    [request] = receiver.on("/ok")
    assert json.loads(request.body) == {"order": 7}
    assert request.headers["idempotency-key"] == ok["id"] and request.headers["x-tenant"] == "t1"
    Webhook(secret).verify(request.body, request.headers)

    missing = (await api.submit(headers, job_type="notification", payload={"url": receiver.url("/missing")})).json()
    down = (
        await api.submit(headers, job_type="notification", payload={"url": receiver.url("/down")}, max_retries=1)
    ).json()
    slow = (
        await api.submit(
            headers, job_type="notification", payload={"url": receiver.url("/slow"), "timeout": 0.5}, max_retries=1
        )
    ).json()
    outcomes = {
        name: await until_status(api, headers, job["id"], 30)
        for name, job in (("missing", missing), ("down", down), ("slow", slow))
    }
    assert (outcomes["missing"]["status"], outcomes["missing"]["attempts"]) == ("dead_lettered", 1)
    for name in ("down", "slow"):
        assert (outcomes[name]["status"], outcomes[name]["attempts"]) == ("dead_lettered", 2), outcomes[name]
        assert "retrying" in [e["event"] for e in await trail(api, headers, outcomes[name]["id"])]
    assert len(receiver.on("/down")) == 2


async def test_an_http_targets_json_answer_is_the_result_after_the_wait_its_retry_after_asked_for(
    api: Api, worker: JobWorker, receiver: Receiver
) -> None:
    headers = await api.new_client("types-target")
    answers = iter(
        [
            Response(status_code=503, headers={"Retry-After": "1"}),  # RETRY_BASE_DELAY is 0.2 s in the tests
            Response(status_code=200, content=b'{"invoice": "INV-7", "lines": [1, 2]}', media_type="application/json"),
        ]
    )
    receiver.answer = lambda _: next(answers)
    job = (await api.submit(headers, job_type="notification", payload={"url": receiver.url("/target")})).json()

    done = await until_status(api, headers, job["id"], 30)

    assert done["status"] == "succeeded" and done["attempts"] == 2, done
    assert done["result"]["body"] == {"invoice": "INV-7", "lines": [1, 2]}
    assert done["result"]["status_code"] == 200 and "body_note" not in done["result"]
    first, second = receiver.on("/target")
    assert second.at - first.at >= 1.0
    [retrying] = [e for e in await trail(api, headers, job["id"]) if e["event"] == "retrying"]
    asked = datetime.fromisoformat(retrying["detail"]["next_attempt_at"]) - datetime.fromisoformat(
        retrying["created_at"]
    )
    assert 0.5 <= asked.total_seconds() <= 1.0, retrying  # not the 0.2 s its backoff would wait


@pytest.mark.slow
async def test_a_big_image_does_not_stall_the_echo_jobs(api: Api, worker: JobWorker, receiver: Receiver) -> None:
    headers = await api.new_client("types-big")
    noise = io.BytesIO()
    Image.frombytes("RGB", (3200, 3200), bytes(range(256)) * (3200 * 3200 * 3 // 256)).save(
        noise, "PNG", compress_level=0
    )
    big = noise.getvalue()
    assert len(big) > 25 * 1024 * 1024
    receiver.answer = lambda _: Response(content=big, media_type="image/png")
    payload = {
        "image_url": receiver.url("/big.png"),
        "operations": ["rotate", "resize", "rotate", "resize", "convert"],  # seconds of one core's work
        "angle": 17,
        "width": 3000,
        "format": "PNG",
    }
    image = (await api.submit(headers, job_type="image", payload=payload, timeout_seconds=120)).json()
    echoes = [(await api.submit(headers, payload={"n": n})).json() for n in range(200)]
    finished = [await until_status(api, headers, job["id"], 120) for job in echoes]
    big_done = await until_status(api, headers, image["id"], 120)
    assert big_done["status"] == "succeeded", big_done["error"]
    assert {job["status"] for job in finished} == {"succeeded"}
    began, ended = (datetime.fromisoformat(big_done[field]).timestamp() for field in ("started_at", "finished_at"))
    stamps = sorted(datetime.fromisoformat(job["finished_at"]).timestamp() for job in finished)
    during = [stamp for stamp in stamps if began < stamp < ended]
    assert len(during) >= 10, (len(during), ended - began)  # the echoes ran while the image did
    # The longest time inside the image's run in which no echo finished: a stalled loop makes it most of the run.
    # Measured against the run itself, so a slow or busy machine stretches both.
    quiet = max(
        min(later, ended) - max(earlier, began)
        for earlier, later in itertools.pairwise(stamps)
        if later > began and earlier < ended
    )
    assert quiet < (ended - began) / 2, (quiet, ended - began)


async def test_each_new_type_refuses_bad_payloads_with_422(api: Api) -> None:
    headers = await api.new_client("types-422")
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("document", {"content": [{"type": "paragraph", "text": "x"}]}, "title"),
        ("document", {"title": "t", "content": [{"type": "poem", "text": "x"}]}, "content"),
        ("document", {"title": "t", "content": [{"type": "paragraph", "text": "x"}], "page_size": "A5"}, "page_size"),
        ("image", {"operations": ["grayscale"]}, ""),
        ("image", {"image_url": "http://x/y.png", "operations": ["explode"]}, "operations"),
        ("image", {"image_url": "http://x/y.png", "operations": ["resize"], "width": 0}, "width"),
        ("notification", {"method": "POST"}, "url"),
        ("notification", {"url": "http://x/y", "timeout": 600}, "timeout"),
        ("notification", {"url": "http://x/y", "method": "BREW"}, "method"),
    ]
    for job_type, payload, field in cases:
        answer = await api.client.post("/api/v1/jobs", json={"job_type": job_type, "payload": payload}, headers=headers)
        assert answer.status_code == 422, (job_type, payload)
        locs = [e["loc"] for e in answer.json()["errors"]]
        assert all(loc[:2] == ["body", "payload"] for loc in locs), locs
        assert not field or any(field in loc for loc in locs), (field, locs)
