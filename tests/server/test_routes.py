"""The HTTP surface's one table (server/app.py `route_table`, the API's rows and the web
page's, as the daemon joins them): the OpenAPI document the daemon serves is built from it
and names the same operations as before the table (issue 29), and every route's `needs` is
a field of `Services`."""

from __future__ import annotations

import dataclasses

from memoryd.http.services import Services
from memoryd.server.app import route_table
from memoryd.web.routes import ROUTES as PAGES
from tests.helpers import AsyncClient, running_daemon

ROUTES = route_table(PAGES)

OPERATIONS = {
    ("delete", "/v1/sessions/{id}"), ("get", "/metrics"), ("get", "/v1/archive"),
    ("get", "/v1/context"), ("get", "/v1/context/log"), ("get", "/v1/daily"),
    ("get", "/v1/daily/{date}"), ("get", "/v1/events"), ("get", "/v1/exclusions"),
    ("get", "/v1/export"), ("get", "/v1/health"), ("get", "/v1/jobs"),
    ("get", "/v1/jobs/queue"), ("get", "/v1/jobs/{id}"), ("get", "/v1/memory"),
    ("get", "/v1/memory/recent"), ("get", "/v1/memory/stats"), ("get", "/v1/memory/why/{line}"),
    ("get", "/v1/sessions"), ("get", "/v1/sessions/{id}"), ("get", "/v1/sessions/{id}/messages"),
    ("get", "/v1/sessions/{id}/summary"), ("get", "/v1/status"), ("post", "/v1/archive/restore"),
    ("post", "/v1/archive/search"), ("post", "/v1/backup"), ("post", "/v1/context"),
    ("post", "/v1/eval"), ("post", "/v1/exclusions"), ("post", "/v1/forget"),
    ("post", "/v1/ingest"),
    ("post", "/v1/jobs/{name}/run"), ("post", "/v1/memory/entries"),
    ("post", "/v1/memory/entries/delete"), ("post", "/v1/memory/search"), ("post", "/v1/search"),
    ("post", "/v1/sessions/{id}/summarize"), ("post", "/v1/web/login"), ("put", "/v1/memory"),
}


async def test_the_served_openapi_document_names_every_operation_of_the_table(
        memoryd_home, sock, src):
    async with running_daemon(memoryd_home, [("generic", src)], sock):
        doc = await AsyncClient(sock).request("GET", "/v1/openapi.json")
    got = {(m, p) for p, ops in doc["paths"].items() for m in ops}
    assert got == OPERATIONS
    assert got == {(r.method, r.doc_path) for r in ROUTES if r.summary is not None}


def test_every_route_needs_a_field_of_services():
    fields = {f.name for f in dataclasses.fields(Services)}
    assert {r.needs for r in ROUTES if r.needs is not None} <= fields
