"""The OpenAPI document, generated from the same pydantic models the handlers use."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from memoryd import api

# (method, path, summary, request body model, query model, response model)
ROUTES: list[tuple[str, str, str, type[BaseModel] | None, type[BaseModel] | None,
                   type[BaseModel] | None]] = [
    ("get", "/v1/health", "Liveness and version", None, None, api.Health),
    ("get", "/v1/status", "What is watched, read, queued (format=text: as memoryctl prints "
     "it)", None, api.StatusQuery, None),
    ("post", "/v1/search", "Full-text search over units", api.SearchRequest, None,
     api.SearchResponse),
    ("get", "/v1/sessions", "Sessions, newest first (keyset paging)", None, api.SessionsQuery,
     api.SessionsPage),
    ("get", "/v1/sessions/{id}", "One session", None, api.SessionRef, api.SessionDetail),
    ("get", "/v1/sessions/{id}/messages", "A session's messages after a sequence number", None,
     api.MessagesQuery, api.MessagesPage),
    ("delete", "/v1/sessions/{id}", "Forget a session everywhere", None, api.SessionRef,
     api.Forgotten),
    ("post", "/v1/ingest", "Backfill a file or folder now", api.IngestRequest, None,
     api.IngestResponse),
    ("post", "/v1/backup", "A consistent copy of the database (VACUUM INTO)",
     api.BackupRequest, None, api.BackupResponse),
    ("get", "/v1/jobs", "Jobs that can be run", None, None, None),
    ("post", "/v1/jobs/{name}/run", "Run a job now", None, None, api.JobResponse),
    ("get", "/v1/events", "Server-sent events of activity", None, None, None),
    ("get", "/metrics", "Prometheus metrics", None, None, None),
]

# service modules append their routes here at import time of their api module
EXTRA_ROUTES: list[tuple[str, str, str, type[BaseModel] | None, type[BaseModel] | None,
                         type[BaseModel] | None]] = []


def document(version: str) -> dict[str, Any]:
    schemas: dict[str, Any] = {}

    def ref(model: type[BaseModel]) -> dict[str, str]:
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        for name, sub in schema.pop("$defs", {}).items():
            schemas[name] = sub
        schemas[model.__name__] = schema
        return {"$ref": f"#/components/schemas/{model.__name__}"}

    error = {"type": "object", "properties": {"error": {
        "type": "object", "required": ["code", "message"],
        "properties": {"code": {"type": "string"}, "message": {"type": "string"},
                       "field": {"type": "string"}}}}}
    schemas["Error"] = error
    paths: dict[str, Any] = {}
    for method, path, summary, body, query, response in ROUTES + EXTRA_ROUTES:
        op: dict[str, Any] = {"summary": summary, "responses": {
            "200": {"description": "OK", "content": {"application/json": {
                "schema": ref(response) if response else {"type": "object"}}}},
            "4XX": {"description": "Bad request, not found, conflict", "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
        }}
        params = []
        if "{" in path:
            name = path.split("{")[1].split("}")[0]
            params.append({"name": name, "in": "path", "required": True,
                           "schema": {"type": "string"}})
        if query is not None:
            for name, field in query.model_fields.items():
                params.append({"name": name, "in": "query", "required": field.is_required(),
                               "schema": query.model_json_schema()["properties"][name]})
        if params:
            op["parameters"] = params
        if body is not None:
            op["requestBody"] = {"required": True, "content": {
                "application/json": {"schema": ref(body)}}}
        paths.setdefault(path, {})[method] = op
    return {
        "openapi": "3.1.0",
        "info": {"title": "memoryd", "version": version},
        "paths": paths,
        "components": {"schemas": schemas,
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{}, {"bearer": []}],
    }
