"""`wordcount`: the most frequent words of a text, as an example of a job type plugin (docs/plugins.md)."""

import re
from collections import Counter

from pydantic import BaseModel, ConfigDict, Field

from app.handlers.base import JobContext, JobType
from app.handlers.errors import PermanentError
from app.schemas.payloads.base import PayloadSpec


class WordCountPayload(BaseModel):
    """What a `wordcount` job takes; the API checks a submit against it (a 422 otherwise) and shows it in OpenAPI."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=100_000, description="The text to count the words of.")
    top: int = Field(default=3, ge=1, le=100, description="How many of the most frequent words to return.")


async def count_words(ctx: JobContext, payload: WordCountPayload) -> dict[str, object]:
    """The result is JSON; raise TransientError to be retried, PermanentError to go straight to the DLQ."""
    words = re.findall(r"[\w']+", payload.text.lower())
    if not words:
        raise PermanentError("the text has no words")
    top = [{"word": word, "count": count} for word, count in Counter(words).most_common(payload.top)]
    return {"words": len(words), "top": top, "job_id": ctx.job_id}


JOB_TYPE = JobType(PayloadSpec("wordcount", WordCountPayload, "Counts the words of a text."), count_words)
