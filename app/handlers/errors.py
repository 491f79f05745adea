"""The two kinds of failure a handler can report; retry policy decides what each means, not the handler."""


class JobError(Exception):
    """Base of handler failures."""


class TransientError(JobError):
    """Worth trying again later: a timeout, a 5xx, a dropped connection. `retry_after`: the seconds the failing
    service asked us to wait (its Retry-After), which the retry policy honours within the job's retry budget."""

    def __init__(self, message: str = "", retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class PermanentError(JobError):
    """Will fail the same way every time: bad input, a 4xx, a corrupt file."""


class JobTimeout(TransientError):
    """The attempt ran past its timeout."""
