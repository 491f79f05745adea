"""A body is JSON as RFC 8259 defines it, read by one parser on every route: NaN, Infinity, a number no double
holds, a lone surrogate, an integer outside signed 64 bits or nesting deeper than 64 levels is a 422 naming where
it is, and nothing is saved."""

import pytest

from tests.api.test_body_limits import body_routes, concrete
from tests.support import Api

INT64_MAX = 2**63 - 1
DEPTH = 64


def nested(levels: int) -> str:
    """A body `levels` deep, the body itself the first level: {"a": [[...[1]...]]}."""
    return '{"a": ' + "[" * (levels - 1) + "1" + "]" * (levels - 1) + "}"


BAD = [
    ('{"x": NaN}', ["body", "x"]),
    ('{"x": Infinity}', ["body", "x"]),
    ('{"x": -Infinity}', ["body", "x"]),
    ('{"x": {"y": [1, 1e400]}}', ["body", "x", "y", 1]),
    ('{"x": -1e400}', ["body", "x"]),
    ('{"x": "a\\ud800b"}', ["body", "x"]),
    ('{"\\udc00": 1}', ["body", "\\udc00"]),  # a key: named as it was written
    (f'{{"x": {INT64_MAX + 1}}}', ["body", "x"]),
    (f'{{"x": {-(2**63) - 1}}}', ["body", "x"]),
    ('{"x": ' + "9" * 5000 + "}", ["body", "x"]),
    (nested(DEPTH + 1), ["body", "a", *[0] * (DEPTH - 1)]),
    (nested(300), ["body", "a", *[0] * (DEPTH - 1)]),
    (nested(100_000), ["body"]),
]


@pytest.mark.parametrize(("raw", "loc"), BAD, ids=[raw[:24] for raw, _ in BAD])
async def test_json_rfc_8259_does_not_allow_is_a_422_naming_where_on_every_route(
    api: Api, raw: str, loc: list[str | int]
) -> None:
    headers = await api.new_client("strict-json") | {"Content-Type": "application/json"}
    for method, path in body_routes(api):
        answer = await api.client.request(method, concrete(path), content=raw.encode(), headers=headers)
        assert answer.status_code == 422, (method, path, answer.text)
        error = answer.json()
        assert error["code"] == "invalid_json", error
        assert [e["loc"] for e in error["errors"]] == [loc], error


@pytest.mark.parametrize(("raw", "_"), BAD[:11], ids=[raw[:24] for raw, _ in BAD[:11]])
async def test_nothing_is_saved_for_json_that_is_not_allowed(api: Api, raw: str, _: object) -> None:
    headers = await api.new_client("strict-saved") | {"Content-Type": "application/json"}
    value = raw.removeprefix('{"x": ').removesuffix("}") if raw.startswith('{"x": ') else raw
    job = '{"job_type": "echo", "payload": {"v": ' + value + "}}"
    schedule = (
        '{"name": "s", "cron": "0 3 * * *", "timezone": "UTC", "job": {"job_type": "echo", "payload": {"v": '
        + value
        + "}}}"
    )
    assert (await api.client.post("/api/v1/jobs", content=job.encode(), headers=headers)).status_code == 422
    assert (await api.client.post("/api/v1/schedules", content=schedule.encode(), headers=headers)).status_code == 422
    assert (await api.client.get("/api/v1/jobs", headers=headers)).json()["items"] == []
    assert (await api.client.get("/api/v1/schedules", headers=headers)).json()["items"] == []


async def test_json_at_the_edge_of_what_is_allowed_is_accepted(api: Api) -> None:
    headers = await api.new_client("strict-edge") | {"Content-Type": "application/json"}
    payload = (
        f'{{"big": {INT64_MAX}, "small": {-(2**63)}, "tiny": 1e-400, "double": 1.7976931348623157e308, '
        f'"pair": "\\ud83d\\ude00", "deep": {"[" * (DEPTH - 2)}1{"]" * (DEPTH - 2)}}}'
    )
    job = '{"job_type": "echo", "payload": ' + payload + "}"  # the deepest value sits at level 64
    answer = await api.client.post("/api/v1/jobs", content=job.encode(), headers=headers)
    assert answer.status_code == 201, answer.text
    saved = (await api.client.get(f"/api/v1/jobs/{answer.json()['id']}", headers=headers)).json()["payload"]
    assert (saved["big"], saved["small"], saved["tiny"], saved["pair"]) == (INT64_MAX, -(2**63), 0.0, "\U0001f600")
    assert saved["double"] == 1.7976931348623157e308
