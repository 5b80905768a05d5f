"""``/docs`` renders in a real browser: Debian's headless Chromium loads the page from the real API
(uvicorn, the app `run` serves) with every host but the loopback address unresolvable, runs Swagger
UI, and the DOM it leaves lists every operation of ``/openapi.json`` (an OpenAPI 3.1 document) and
no "Unable to render this definition" error. Asset status codes alone passed with Swagger UI 4.15,
which cannot read OpenAPI 3.1 and rendered only that error."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import NamedTuple

import httpx
import pytest

from indexer.service.api import ApiServer, create_app
from tests.headless_chromium import dump_dom, require_chromium
from tests.real_backend import LazyBackend


class Operation(NamedTuple):
    method: str
    path: str
    summary: str


class _Operations(HTMLParser):
    """The operations Swagger UI rendered: each ``opblock-summary`` row's method, path and summary."""

    FIELDS = {"opblock-summary-method": "method", "opblock-summary-path": "path",
              "opblock-summary-description": "summary"}

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[dict[str, str]] = []
        self._field: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = (dict(attrs).get("class") or "").split()
        field = next((self.FIELDS[c] for c in classes if c in self.FIELDS), None)
        if field == "method":
            self.rows.append({})
        if field is not None and self.rows:
            self._field = field
            if field == "path":
                self.rows[-1]["path"] = dict(attrs).get("data-path") or ""

    def handle_endtag(self, tag: str) -> None:
        self._field = None

    def handle_data(self, data: str) -> None:
        if self._field in ("method", "summary") and self.rows:
            self.rows[-1][self._field] = self.rows[-1].get(self._field, "") + data

    def operations(self) -> set[Operation]:
        return {Operation(r.get("method", "").strip().upper(), r.get("path", ""), r.get("summary", "").strip())
                for r in self.rows}


def rendered_operations(dom: str) -> set[Operation]:
    parser = _Operations()
    parser.feed(dom)
    return parser.operations()


def documented_operations(openapi: dict) -> set[Operation]:
    return {Operation(method.upper(), path, op.get("summary", ""))
            for path, ops in openapi["paths"].items() for method, op in ops.items()}


@pytest.fixture(scope="module")
def api_url():
    require_chromium()
    # The app `run` and `serve` serve; /docs and /openapi.json never reach the backend (built lazily).
    server = ApiServer(create_app(LazyBackend(), admin_token=None), "127.0.0.1", 0)
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


def test_docs_render_every_operation_of_the_openapi_31_document(api_url):
    openapi = httpx.get(f"{api_url}/openapi.json", timeout=10).json()
    assert openapi["openapi"].startswith("3.1")
    dom = dump_dom(f"{api_url}/docs")
    error = dom.find("Unable to render")
    assert error < 0 and "errors-wrapper" not in dom, dom[max(0, error - 100):error + 600] or dom[-3000:]
    rendered = rendered_operations(dom)
    assert Operation("POST", "/v1/memory_search", "Scoped hybrid search over a persona's memory") in rendered
    assert rendered == documented_operations(openapi)
    assert "OAS 3.1" in dom and openapi["info"]["title"] in dom
