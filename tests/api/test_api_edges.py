"""Answers the fuzz run found wrong once, each pinned here: a null in a webhook change, a body that is no JSON,
a method the path does not serve, a NUL in an id or a text field, a time given as a number."""

from tests.support import Api


async def test_a_webhook_change_with_a_null_field_is_a_422_that_names_it(api: Api) -> None:
    headers = await api.new_client("edges-patch")
    for field in ("url", "events", "active"):
        answer = await api.client.patch("/api/v1/webhooks/0", json={field: None}, headers=headers)
        assert answer.status_code == 422, answer.text
        assert f"{field} cannot be null" in answer.json()["detail"] + str(answer.json()["errors"])


async def test_a_body_that_is_not_json_is_the_contracts_422(api: Api) -> None:
    headers = {**await api.new_client("edges-body"), "Content-Type": "application/json"}
    answer = await api.client.post("/api/v1/webhooks", content=b"\x17\xff\xfe", headers=headers)
    assert (answer.status_code, answer.json()["code"]) == (422, "invalid_json")


async def test_a_method_the_path_does_not_serve_names_every_one_it_does(api: Api) -> None:
    answer = await api.client.request("OPTIONS", "/api/v1/jobs")
    assert answer.status_code == 405
    assert answer.headers["allow"] == "GET, POST"


async def test_a_nul_in_an_id_is_a_422_not_a_server_error(api: Api) -> None:
    """A DLQ replay naming such an id replays nothing instead, as for any unknown id (tests/services/test_dlq.py)."""
    headers = await api.new_client("edges-nul")
    by_id = await api.client.get("/api/v1/jobs/a%00b", headers=headers)
    assert (by_id.status_code, by_id.json()["code"]) == (422, "invalid_text"), by_id.text


async def test_a_run_at_given_as_a_number_is_refused(api: Api) -> None:
    headers = await api.new_client("edges-time")
    answer = await api.submit(headers, job_type="echo", payload={}, run_at=0)
    assert answer.status_code == 422
    assert "ISO 8601 text" in str(answer.json()["errors"])
