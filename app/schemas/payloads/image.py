"""`image`'s payload: the image (by URL or inline) and the operations to apply to it."""

import base64
from typing import Literal, Self

from pydantic import BaseModel, Field, field_validator, model_validator

from app.core.ssrf import check_syntax
from app.schemas.payloads.base import PayloadSpec
from app.schemas.requests import REQUEST_CONFIG, WholeNumber

MAX_BASE64_BYTES = 20 * 1024 * 1024

Operation = Literal["resize", "thumbnail", "grayscale", "rotate", "compress", "convert"]
Format = Literal["JPEG", "PNG", "WEBP"]


class ImagePayload(BaseModel):
    model_config = REQUEST_CONFIG | {
        "json_schema_extra": {
            "examples": [
                {"image_url": "https://images.example.com/photo.jpg", "operations": ["thumbnail"], "width": 320}
            ]
        }
    }

    image_url: str | None = Field(
        default=None, max_length=2048, pattern=r"^https?://", description="An http(s) URL of the image."
    )
    image_base64: str | None = Field(default=None, description="The image file in base64, at most 20 MiB decoded.")
    operations: list[Operation] = Field(min_length=1, max_length=10, description="Applied in this order.")
    width: WholeNumber | None = Field(default=None, ge=1, le=10_000)
    height: WholeNumber | None = Field(default=None, ge=1, le=10_000)
    format: Format | None = Field(default=None, description="The output format; by default the source's.")
    quality: WholeNumber | None = Field(default=None, ge=1, le=95, description="JPEG/WEBP quality; 75 with `compress`.")
    angle: WholeNumber = Field(default=90, ge=-360, le=360, description="Degrees counter-clockwise, for `rotate`.")

    @field_validator("image_url")
    @classmethod
    def _plain_url(cls, value: str | None) -> str | None:
        if value is not None:
            check_syntax(value)
        return value

    @field_validator("image_base64")
    @classmethod
    def _decodable(cls, value: str | None) -> str | None:
        if value is not None:
            decode_base64(value)
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if (self.image_url is None) == (self.image_base64 is None):
            raise ValueError("give exactly one of image_url and image_base64")
        if "resize" in self.operations and self.width is None and self.height is None:
            raise ValueError("resize needs a width, a height or both")
        if "convert" in self.operations and self.format is None:
            raise ValueError("convert needs a format: JPEG, PNG or WEBP")
        return self


def decode_base64(text: str) -> bytes:
    """The bytes `text` encodes; ValueError with a sentence when it is not base64 of 1 byte to 20 MiB."""
    # Line-wrapped base64 (as `base64` prints it) is fine; any other stray character is not.
    compact = "".join(text.split())
    if len(compact) > (MAX_BASE64_BYTES + 2) // 3 * 4:
        raise ValueError(f"image_base64 decodes to more than {MAX_BASE64_BYTES} bytes (20 MiB), the most allowed")
    try:
        data = base64.b64decode(compact, validate=True)
    except ValueError as exc:  # binascii.Error, or characters outside ASCII
        raise ValueError(f"image_base64 is not valid base64 ({exc})") from None
    if not data:
        raise ValueError("image_base64 is empty")
    return data


def _urls(payload: ImagePayload) -> dict[str, str]:
    return {} if payload.image_url is None else {"image_url": payload.image_url}


SPEC = PayloadSpec(
    "image", ImagePayload, "Transforms an image (resize, thumbnail, grayscale, rotate, compress, convert).", urls=_urls
)
