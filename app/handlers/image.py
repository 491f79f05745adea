"""`image`: resizes, thumbnails, greys, rotates, compresses or converts an image with Pillow."""

import hashlib
import re
import warnings
from io import BytesIO
from typing import Any

import httpx
from PIL import Image, ImageOps, UnidentifiedImageError

from app.core import cpu_reports
from app.core.ssrf import TooLarge, UnsafeURL
from app.handlers.base import JobContext, JobTools, JobType
from app.handlers.errors import PermanentError, TransientError
from app.schemas.payloads.image import SPEC, ImagePayload, decode_base64

MAX_PIXELS = 50_000_000
MAX_DOWNLOAD_BYTES = 40 * 1024 * 1024
DEFAULT_QUALITY = 75
THUMBNAIL_SIDE = 128
PIXELS_IN_MESSAGE = re.compile(r"\((\d+) pixels\)")
EXTENSIONS = {"JPEG": "jpg", "PNG": "png", "WEBP": "webp"}
# The modes each output format can hold; anything else is converted before saving.
SAVABLE_MODES = {
    "JPEG": {"L", "RGB", "CMYK"},
    "PNG": {"1", "L", "LA", "I;16", "P", "RGB", "RGBA"},
    "WEBP": {"RGB", "RGBA"},
}


def transform_image(
    data: bytes,
    operations: list[str],
    width: int | None,
    height: int | None,
    fmt: str | None,
    quality: int | None,
    angle: int,
) -> tuple[bytes, int, int, str]:
    """Apply `operations` in order to the image file `data`: the new file's bytes, width, height and format."""
    img, source_format = _open(data)
    steps = len(operations) + 1  # the operations, then the save
    for done, operation in enumerate(operations, start=1):
        try:
            img = _apply(img, operation, width, height, angle)
        except (OSError, ValueError) as exc:  # some modes lack some operations (thumbnail of a 16-bit PNG)
            raise PermanentError(f"Pillow cannot {operation} this {img.mode} image ({exc})") from None
        cpu_reports.report(done / steps, operation)
    out_format = fmt or (source_format if source_format in EXTENSIONS else "PNG")
    compress = "compress" in operations
    if compress and quality is None:
        quality = DEFAULT_QUALITY
    return _save(img, out_format, quality, compress), img.width, img.height, out_format


def _open(data: bytes) -> tuple[Image.Image, str | None]:
    Image.MAX_IMAGE_PIXELS = MAX_PIXELS
    with warnings.catch_warnings():
        # Pillow only warns between the limit and twice it; a bomb is refused either way.
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            img = Image.open(BytesIO(data))
            img.load()
            source_format = img.format
            # Phones store the rotation in EXIF; apply it so widths and heights mean what users see.
            ImageOps.exif_transpose(img, in_place=True)
            return img, source_format
        except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
            raise PermanentError(f"the image is a decompression bomb: {_pixels(exc)}") from None
        except UnidentifiedImageError:
            raise PermanentError("the file is not an image Pillow can read") from None
        except (OSError, ValueError, SyntaxError) as exc:
            raise PermanentError(f"the file is not an image Pillow can read ({exc})") from None


def _pixels(bomb: Exception) -> str:
    # Pillow's message names the size, and a limit that is twice ours when it errors rather than warns.
    found = PIXELS_IN_MESSAGE.search(str(bomb))
    return f"{found[1]} pixels, more than the {MAX_PIXELS} allowed" if found else str(bomb)


def _apply(img: Image.Image, operation: str, width: int | None, height: int | None, angle: int) -> Image.Image:
    if operation == "resize":
        return img.resize(_resized(img.size, width, height), Image.Resampling.LANCZOS)
    if operation == "thumbnail":
        img.thumbnail((width or THUMBNAIL_SIDE, height or THUMBNAIL_SIDE))
        return img
    if operation == "grayscale":
        return img.convert("LA" if img.has_transparency_data else "L")
    if operation == "rotate":
        return img.rotate(angle, expand=True)
    return img  # compress and convert change only how the image is saved


def _resized(size: tuple[int, int], width: int | None, height: int | None) -> tuple[int, int]:
    w, h = size
    if width and height:
        target = (width, height)
    elif width:
        target = (width, max(1, round(h * width / w)))
    elif height:
        target = (max(1, round(w * height / h)), height)
    else:
        raise PermanentError("resize needs a width, a height or both")
    if target[0] * target[1] > MAX_PIXELS:
        raise PermanentError(f"resizing to {target[0]}x{target[1]} would exceed {MAX_PIXELS} pixels")
    return target


def _save(img: Image.Image, fmt: str, quality: int | None, compress: bool) -> bytes:
    if img.mode not in SAVABLE_MODES[fmt]:
        img = _flatten(img) if fmt == "JPEG" else img.convert("RGBA" if img.has_transparency_data else "RGB")
    options: dict[str, Any] = {"optimize": compress}
    if quality is not None and fmt != "PNG":
        options["quality"] = quality
    out = BytesIO()
    try:
        img.save(out, fmt, **options)
    except (OSError, ValueError) as exc:
        raise PermanentError(f"Pillow could not write the image as {fmt} ({exc})") from None
    return out.getvalue()


def _flatten(img: Image.Image) -> Image.Image:
    # JPEG has no alpha: put transparent areas on white rather than on whatever colour they hide.
    if not img.has_transparency_data:
        return img.convert("RGB")
    rgba = img.convert("RGBA")
    flat = Image.new("RGB", rgba.size, "white")
    flat.paste(rgba, mask=rgba.getchannel("A"))
    return flat


async def handle(ctx: JobContext, payload: ImagePayload) -> dict[str, Any]:
    tools = ctx.require_tools()
    if payload.image_base64 is not None:
        source = decode_base64(payload.image_base64)
    else:
        source = await _fetch(tools, str(payload.image_url))
    options = (payload.width, payload.height, payload.format, payload.quality, payload.angle)
    operations = list(payload.operations)  # each one done is reported, as a share of them and the save
    data, width, height, fmt = await tools.cpu(
        transform_image, source, operations, *options, progress=ctx.progress_sink
    )
    url = await tools.save_artifact(ctx.job_id, data, f"image/{fmt.lower()}", f"image.{EXTENSIONS[fmt]}")
    await ctx.progress(1.0, f"{len(operations)} operations done")
    digest = hashlib.sha256(data).hexdigest()
    return {"width": width, "height": height, "format": fmt, "bytes": len(data), "sha256": digest, "artifact_url": url}


async def _fetch(tools: JobTools, url: str) -> bytes:
    try:
        data, content_type = await tools.fetch(url, MAX_DOWNLOAD_BYTES)
    except (UnsafeURL, TooLarge) as exc:
        raise PermanentError(str(exc)) from exc
    except httpx.HTTPStatusError as exc:
        status = exc.response.status_code
        # Redirects are not followed, so a 3xx is as final as a 4xx.
        error = TransientError if status >= 500 else PermanentError
        raise error(f"{url} answered {status}") from exc
    except (httpx.HTTPError, OSError) as exc:
        raise TransientError(f"{url} could not be fetched ({str(exc) or type(exc).__name__})") from exc
    if not content_type.lower().startswith("image/"):
        raise PermanentError(f"{url} answered {content_type or 'no content type'}, not an image")
    return data


JOB_TYPE = JobType(SPEC, handle)
