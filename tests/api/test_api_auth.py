"""API keys and per-client isolation."""

from app.main import create_app
from tests.conftest import ADMIN_KEY, make_settings
from tests.support import Api, api_with


async def test_no_key_bad_key_and_revoked_key_get_401(api: Api) -> None:
    assert (await api.client.get("/api/v1/jobs")).status_code == 401
    bad = await api.client.get("/api/v1/jobs", headers={"Authorization": "Bearer tq_nonsense"})
    assert bad.status_code == 401
    assert bad.json()["code"] == "unauthorized"

    created = await api.client.post("/api/v1/api-keys", json={"client_id": "acme"}, headers=api.admin)
    assert created.status_code == 201
    key = created.json()
    assert key["client_id"] == "acme" and key["api_key"].startswith("tq_")
    headers = {"Authorization": f"Bearer {key['api_key']}"}
    assert (await api.client.get("/api/v1/jobs", headers=headers)).status_code == 200

    revoked = await api.client.delete(f"/api/v1/api-keys/{key['id']}", headers=api.admin)
    assert revoked.status_code == 204
    assert (await api.client.get("/api/v1/jobs", headers=headers)).status_code == 401
    again = await api.client.delete(f"/api/v1/api-keys/{key['id']}", headers=api.admin)
    assert again.status_code == 404


async def test_only_a_bearer_key_authenticates_and_anything_else_is_told_how_to_send_one(api: Api) -> None:
    client = await api.new_client("schemes")
    key = client["Authorization"].partition(" ")[2]
    for header in ("Basic dXNlcjpwYXNz", "Bearer", "Bearer ", key, "Token " + key):
        answer = await api.client.get("/api/v1/jobs", headers={"Authorization": header})
        assert answer.status_code == 401, header
        assert answer.json()["detail"].startswith("No API key sent"), header
        assert answer.headers["www-authenticate"] == "Bearer"
    lower = await api.client.get("/api/v1/jobs", headers={"Authorization": "bearer " + key})
    assert lower.status_code == 200


async def test_key_management_needs_admin_and_never_shows_keys(api: Api) -> None:
    client = await api.new_client("plain")
    forbidden = await api.client.post("/api/v1/api-keys", json={"client_id": "x"}, headers=client)
    assert forbidden.status_code == 403
    listed = await api.client.get("/api/v1/api-keys", headers=api.admin)
    assert listed.status_code == 200
    assert listed.json() and all("api_key" not in row and "key_hash" not in row for row in listed.json())
    bad = await api.client.post("/api/v1/api-keys", json={"client_id": "has space"}, headers=api.admin)
    assert bad.status_code == 422


async def test_another_clients_job_is_404_everywhere(api: Api) -> None:
    alice, bob = await api.new_client("alice"), await api.new_client("bob")
    job = (await api.submit(alice, payload={"secret": 1})).json()
    for path in (f"/api/v1/jobs/{job['id']}", f"/api/v1/jobs/{job['id']}/events"):
        answer = await api.client.get(path, headers=bob)
        assert answer.status_code == 404
        assert answer.json()["code"] == "not_found"
        assert (await api.client.get(path, headers=alice)).status_code == 200
    bobs = (await api.client.get("/api/v1/jobs", headers=bob)).json()["items"]
    assert job["id"] not in [j["id"] for j in bobs]
    seen_by_admin = await api.client.get(f"/api/v1/jobs/{job['id']}", headers=api.admin)
    assert seen_by_admin.json()["client_id"] == "alice"


async def test_a_key_revoked_in_one_api_process_is_refused_at_once_by_another(api: Api) -> None:
    """Each process serves known keys from memory; a revocation anywhere ends that trust everywhere at once."""
    other_app = create_app(make_settings())
    async with api_with(other_app, ADMIN_KEY) as other:
        created = (await api.client.post("/api/v1/api-keys", json={"client_id": "twice"}, headers=api.admin)).json()
        headers = {"Authorization": f"Bearer {created['api_key']}"}
        for process in (api, other, api, other):  # the second round is served from each process's memory
            assert (await process.client.get("/api/v1/jobs", headers=headers)).status_code == 200
        assert (await api.client.delete(f"/api/v1/api-keys/{created['id']}", headers=api.admin)).status_code == 204
        assert (await other.client.get("/api/v1/jobs", headers=headers)).status_code == 401
        assert (await api.client.get("/api/v1/jobs", headers=headers)).status_code == 401
