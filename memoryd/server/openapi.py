"""The OpenAPI document, built from the route table (server/app.py route_table) and the same
pydantic models the handlers use."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel

from memoryd.http.route import Route


def document(routes: Iterable[Route], version: str) -> dict[str, Any]:
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
    for route in routes:
        if route.summary is None:
            continue
        method, path, summary = route.method, route.doc_path, route.summary
        body, query, response = route.body, route.query, route.response
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
