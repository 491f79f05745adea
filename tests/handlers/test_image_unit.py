"""The `image` job type without services: Pillow's transforms, the bomb guard, payload 422s, the handler on fakes."""

import base64
import hashlib
import io
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

import httpx
import pytest
from PIL import Image
from pydantic import ValidationError

from app.core.ssrf import TooLarge, UnsafeURL
from app.handlers.base import JobContext
from app.handlers.errors import PermanentError, TransientError
from app.handlers.image import JOB_TYPE, MAX_DOWNLOAD_BYTES, transform_image
from app.schemas.payloads.image import MAX_BASE64_BYTES, ImagePayload
from tests.fake_tools import FakeTools

T = TypeVar("T")
URL = "https://images.example.com/cat.png"


def make_image(size: tuple[int, int] = (400, 200), mode: str = "RGB", fmt: str = "PNG", **save: Any) -> bytes:
    out = io.BytesIO()
    Image.new(mode, size, "red" if mode != "RGBA" else (0, 0, 0, 0)).save(out, fmt, **save)
    return out.getvalue()


def noisy_image() -> bytes:
    out = io.BytesIO()
    Image.frombytes("RGB", (200, 200), os.urandom(200 * 200 * 3)).save(out, "PNG")
    return out.getvalue()


def transform(data: bytes, *operations: str, **options: Any) -> tuple[Image.Image, bytes, int, int, str]:
    args = {"width": None, "height": None, "fmt": None, "quality": None, "angle": 90} | options
    out, width, height, fmt = transform_image(data, list(operations), *args.values())
    return Image.open(io.BytesIO(out)), out, width, height, fmt


def http_status_error(status: int) -> httpx.HTTPStatusError:
    request = httpx.Request("GET", URL)
    return httpx.HTTPStatusError(f"{status}", request=request, response=httpx.Response(status, request=request))


def context(tools: FakeTools) -> JobContext:
    return JobContext(job_id="job-7", job_type="image", attempt=1, runs=1, request_id=None, tools=tools)


@pytest.mark.parametrize(("options", "size"), [({"width": 100}, (100, 50)), ({"height": 50}, (100, 50))])
def test_resize_with_one_side_keeps_the_aspect(options: dict[str, int], size: tuple[int, int]) -> None:
    img, _, width, height, _ = transform(make_image(), "resize", **options)
    assert img.size == (width, height) == size


def test_resize_with_both_sides_is_exact() -> None:
    assert transform(make_image(), "resize", width=30, height=70)[0].size == (30, 70)


def test_resize_refuses_a_size_past_the_pixel_limit() -> None:
    with pytest.raises(PermanentError, match="would exceed"):
        transform(make_image(), "resize", width=10_000, height=10_000)


@pytest.mark.parametrize(("options", "size"), [({}, (128, 64)), ({"width": 50, "height": 50}, (50, 25))])
def test_thumbnail_fits_in_its_bounds(options: dict[str, int], size: tuple[int, int]) -> None:
    assert transform(make_image(), "thumbnail", **options)[0].size == size


def test_grayscale_gives_mode_l() -> None:
    assert transform(make_image(), "grayscale")[0].mode == "L"


def test_rotate_90_swaps_the_sides() -> None:
    assert transform(make_image(), "rotate")[0].size == (200, 400)


def test_operations_apply_in_the_given_order() -> None:
    assert transform(make_image(), "resize", "rotate", width=100)[0].size == (50, 100)
    assert transform(make_image(), "rotate", "resize", width=100)[0].size == (100, 200)


@pytest.mark.parametrize("fmt", ["WEBP", "JPEG"])
def test_convert_png_to(fmt: str) -> None:
    img, _, _, _, out_format = transform(make_image(), "convert", fmt=fmt)
    assert img.format == out_format == fmt


def test_the_source_format_is_kept_and_an_unusual_one_becomes_png() -> None:
    assert transform(make_image(fmt="JPEG"), "grayscale")[4] == "JPEG"
    assert transform(make_image(fmt="GIF"), "grayscale")[4] == "PNG"


def test_lower_quality_compresses_to_fewer_bytes() -> None:
    source = noisy_image()
    small = transform(source, "compress", fmt="JPEG", quality=20)[1]
    large = transform(source, "compress", fmt="JPEG", quality=90)[1]
    default = transform(source, "compress", fmt="JPEG")[1]
    assert len(small) < len(default) < len(large)


def test_rgba_to_jpeg_puts_transparency_on_white() -> None:
    img = transform(make_image(mode="RGBA"), "convert", fmt="JPEG")[0]
    assert img.mode == "RGB"
    r, g, b = img.getpixel((10, 10))  # type: ignore[misc]
    assert min(r, g, b) > 245


def test_the_exif_orientation_is_applied() -> None:
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90° clockwise to display"
    assert transform(make_image(fmt="JPEG", exif=exif), "grayscale")[0].size == (200, 400)


def test_a_decompression_bomb_is_refused() -> None:
    bomb = make_image(size=(20_000, 20_000), mode="1")
    assert len(bomb) < 100_000  # small on the wire, 400 million pixels once decoded
    with pytest.raises(PermanentError, match="decompression bomb: 400000000 pixels"):
        transform(bomb, "grayscale")


def test_an_image_just_past_the_limit_is_refused_too() -> None:
    # Pillow only warns between its limit and twice it; the warning is turned into a refusal.
    with pytest.raises(PermanentError, match="decompression bomb: 56000000 pixels"):
        transform(make_image(size=(8000, 7000), mode="1"), "grayscale")


@pytest.mark.parametrize("data", [b"hello, I am a text file\n", make_image()[:100]])
def test_a_file_pillow_cannot_read_is_refused(data: bytes) -> None:
    with pytest.raises(PermanentError, match="not an image Pillow can read"):
        transform(data, "grayscale")


def test_an_operation_pillow_cannot_do_on_this_mode_is_refused() -> None:
    with pytest.raises(PermanentError, match="Pillow cannot thumbnail this I;16 image"):
        transform(make_image(size=(1000, 500), mode="I;16"), "thumbnail")


def test_the_refusal_crosses_a_process_boundary_intact() -> None:
    # Spawned, like the worker's CPU pool: the function must import by name in a fresh interpreter.
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        future = pool.submit(transform_image, b"not an image", ["grayscale"], None, None, None, None, 90)
        with pytest.raises(PermanentError, match="not an image Pillow can read"):
            future.result(timeout=60)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"image_url": URL}, "operations"),  # missing field
        ({"image_url": URL, "operations": ["resize"], "width": "wide"}, "width"),  # wrong type
        ({"image_url": URL, "operations": ["rotate"], "angle": 361}, "angle"),  # out of range
        ({"image_url": URL, "operations": ["compress"], "quality": 96}, "quality"),
        ({"image_url": URL, "operations": ["resize"], "width": 0}, "width"),
        ({"image_url": URL, "operations": ["blur"]}, "operations"),
        ({"image_url": URL, "operations": ["rotate"] * 11}, "operations"),
        ({"image_url": URL, "operations": ["rotate"], "colour": "red"}, "colour"),
        ({"image_url": "ftp://example.com/a.png", "operations": ["rotate"]}, "image_url"),
        ({"image_url": URL, "image_base64": b64(b"x"), "operations": ["rotate"]}, "exactly one of"),
        ({"operations": ["rotate"]}, "exactly one of"),
        ({"image_url": URL, "operations": ["resize"]}, "resize needs a width, a height or both"),
        ({"image_url": URL, "operations": ["convert"]}, "convert needs a format"),
        ({"image_base64": "not base64!", "operations": ["rotate"]}, "image_base64 is not valid base64"),
        ({"image_base64": "", "operations": ["rotate"]}, "image_base64 is empty"),
        ({"image_base64": "A" * (MAX_BASE64_BYTES // 3 * 4 + 8), "operations": ["rotate"]}, "more than 20971520 bytes"),
    ],
)
def test_a_bad_payload_is_refused_with_a_clear_message(payload: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        ImagePayload.model_validate(payload)


def test_line_wrapped_base64_is_accepted() -> None:
    wrapped = base64.encodebytes(make_image()).decode()
    assert "\n" in wrapped
    ImagePayload.model_validate({"image_base64": wrapped, "operations": ["rotate"]})


async def test_the_handler_transforms_base64_and_stores_the_result() -> None:
    tools = FakeTools()
    payload = ImagePayload.model_validate(
        {"image_base64": b64(make_image()), "operations": ["resize", "convert"], "width": 100, "format": "JPEG"}
    )
    result = await JOB_TYPE.handler(context(tools), payload)

    data, content_type, filename = tools.artifacts["job-7"]
    assert (content_type, filename) == ("image/jpeg", "image.jpg")
    assert tools.fetched == []
    assert result == {
        "width": 100,
        "height": 50,
        "format": "JPEG",
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "artifact_url": "/api/v1/jobs/job-7/artifact",
    }


async def test_the_handler_fetches_a_url_within_the_download_cap() -> None:
    tools = FakeTools(fetched=(make_image(fmt="WEBP"), "image/webp"))
    payload = ImagePayload.model_validate({"image_url": URL, "operations": ["thumbnail"]})
    result = await JOB_TYPE.handler(context(tools), payload)
    assert tools.fetched == [(URL, MAX_DOWNLOAD_BYTES)]
    assert (result["width"], result["height"], result["format"]) == (128, 64, "WEBP")
    assert tools.artifacts["job-7"][1:] == ("image/webp", "image.webp")


@pytest.mark.parametrize(
    ("answer", "error", "message"),
    [
        ((b"<html></html>", "text/html; charset=utf-8"), PermanentError, "answered text/html; charset=utf-8, not an"),
        (http_status_error(404), PermanentError, "answered 404"),
        (http_status_error(301), PermanentError, "answered 301"),
        (http_status_error(503), TransientError, "answered 503"),
        (httpx.ReadTimeout("timed out"), TransientError, "could not be fetched"),
        (httpx.ConnectError(""), TransientError, r"could not be fetched \(ConnectError\)"),
        (UnsafeURL("resolves to 10.0.0.1, a private address"), PermanentError, "a private address"),
        (TooLarge(f"answered more than {MAX_DOWNLOAD_BYTES} bytes"), PermanentError, "answered more than"),
    ],
)
async def test_fetch_failures_map_to_permanent_or_transient(
    answer: tuple[bytes, str] | Exception, error: type[Exception], message: str
) -> None:
    payload = ImagePayload.model_validate({"image_url": URL, "operations": ["grayscale"]})
    with pytest.raises(error, match=message):
        await JOB_TYPE.handler(context(FakeTools(fetched=answer)), payload)
