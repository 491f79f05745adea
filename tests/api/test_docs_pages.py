"""/docs and /redoc work without internet access: every script, style and icon they load is served by the
service itself."""

import re
from urllib.parse import urljoin, urlsplit

import pytest

from tests.support import Api

ASSET = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']|\b(?:url|spec-url)\s*:\s*["']([^"']+)["']""")


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
async def test_the_docs_pages_load_only_assets_the_service_serves(api: Api, page: str) -> None:
    answer = await api.client.get(page)
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/html")
    found = [a or b for a, b in ASSET.findall(answer.text)]
    assets = [url for url in found if not url.startswith(("#", "data:"))]
    assert any(url.endswith(".js") for url in assets), answer.text  # the page's script is among them
    for url in assets:
        resolved = urljoin(str(answer.url), url)
        assert urlsplit(resolved).netloc == urlsplit(str(answer.url)).netloc, f"{page} loads {url} from elsewhere"
        loaded = await api.client.get(resolved)
        assert loaded.status_code == 200 and loaded.content, f"{page}: {url} answers {loaded.status_code}"
    assert "https://" not in answer.text, answer.text  # nothing else reaches out either (fonts, icons)
