"""loguru set-up: readable lines in development, JSON in production, the request id on every line, no secrets."""

import logging
import sys
from collections.abc import Callable
from contextvars import ContextVar
from types import FrameType
from typing import TYPE_CHECKING

from asgi_correlation_id import correlation_id
from loguru import logger

from app.core.config import Settings
from app.core.redaction import Redactor

if TYPE_CHECKING:
    from loguru import Record

# Workers set this from the message headers; the API's middleware sets correlation_id.
worker_request_id: ContextVar[str | None] = ContextVar("worker_request_id", default=None)

TEXT_FORMAT = (
    "<green>{time:HH:mm:ss.SSS}</green> <level>{level: <7}</level> "
    "<cyan>{extra[request_id]}</cyan> {name}: <level>{message}</level>"
)


def current_request_id() -> str | None:
    """The request id of whatever this task is serving: an HTTP request or a job."""
    return worker_request_id.get() or correlation_id.get()


def _patcher(redact: Callable[[str], str]) -> Callable[["Record"], None]:
    """Give every record its request id and take secrets out of its message, before any sink sees it."""

    def patch(record: "Record") -> None:
        record["extra"]["request_id"] = current_request_id() or "-"
        record["message"] = redact(record["message"])

    return patch


class _RedactedStderr:
    """stderr for loguru, redacting whole lines: tracebacks and extra fields carry secrets a message did not."""

    def __init__(self, redact: Callable[[str], str]) -> None:
        self.redact = redact

    def write(self, text: str) -> None:
        sys.stderr.write(self.redact(text))

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return sys.stderr.isatty()


class _InterceptHandler(logging.Handler):
    """Route the standard library's records (uvicorn, alembic) through loguru."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            level: str | int = logger.level(record.levelname).name
        except ValueError:
            level = record.levelno
        frame: FrameType | None = logging.currentframe()
        depth = 2
        while frame is not None and frame.f_code.co_filename == logging.__file__:
            frame = frame.f_back
            depth += 1
        source = record.name

        def rename(entry: "Record") -> None:
            entry["name"] = source  # uvicorn.error or alembic, not "logging"

        named = logger.patch(rename)
        named.opt(depth=depth, exception=record.exc_info).log(level, record.getMessage())


def configure_logging(settings: Settings) -> None:
    """Install the one log sink for this process."""
    redact = Redactor.for_settings(settings)
    stderr = _RedactedStderr(redact)
    logger.remove()
    logger.configure(patcher=_patcher(redact))
    if settings.json_logs:
        logger.add(stderr, level=settings.log_level, serialize=True, backtrace=False, diagnose=False)
    else:
        logger.add(stderr, level=settings.log_level, format=TEXT_FORMAT, backtrace=False, diagnose=False)
    logging.basicConfig(handlers=[_InterceptHandler()], level=logging.INFO, force=True)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers = [_InterceptHandler()]
        logging.getLogger(name).propagate = False
    logging.getLogger("uvicorn.access").setLevel(logging.WARNING)
    logging.getLogger("alembic").setLevel(logging.WARNING)
    # One line per HTTP request would cost a log record per webhook attempt; attempts have their own log.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("alembic.runtime.migration").setLevel(logging.INFO)  # "Running upgrade 0001 -> 0002"
