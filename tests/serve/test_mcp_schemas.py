"""The tools' schemas pass what the MCP Inspector's ``--strict`` checks, tested here with
``jsonschema`` (the Inspector itself is an npm download these machines cannot make).

The Inspector validates with Ajv, whose strict mode refuses: unknown keywords (``strictSchema``),
a ``required`` name not declared in ``properties`` (``strictRequired``), and keywords that do not
apply to the declared ``type`` (``strictTypes``). With the MCP spec: every ``inputSchema`` and
``outputSchema`` is a JSON Schema (Draft 2020-12, the spec's default dialect) with ``type: object``,
every ``$ref`` resolves, ``serverInfo`` has a name and a version, and a tool's structured result
validates against its ``outputSchema``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from core.build.builder import build_index
from core.serve.mcp_server import build_server
from core.serve.tools import ServeConfig, Tools
from tests.serve.serve_helpers import make_serve_vault

KEYWORDS = {  # Draft 2020-12: core, applicator, unevaluated, validation, meta-data, format, content
    *("$schema", "$id", "$ref", "$anchor", "$dynamicRef", "$dynamicAnchor", "$vocabulary", "$comment", "$defs"),
    *("allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas", "prefixItems", "items"),
    *("contains", "properties", "patternProperties", "additionalProperties", "propertyNames"),
    *("unevaluatedItems", "unevaluatedProperties", "type", "enum", "const", "multipleOf", "maximum"),
    *("exclusiveMaximum", "minimum", "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems"),
    *("minItems", "uniqueItems", "maxContains", "minContains", "maxProperties", "minProperties", "required"),
    *("dependentRequired", "title", "description", "default", "deprecated", "readOnly", "writeOnly"),
    *("examples", "format", "contentEncoding", "contentMediaType", "contentSchema"),
}
FOR_TYPE = {  # keyword -> the type it applies to (Ajv strictTypes)
    **dict.fromkeys(("properties", "required", "additionalProperties", "patternProperties"), "object"),
    **dict.fromkeys(("minProperties", "maxProperties", "propertyNames", "dependentRequired"), "object"),
    **dict.fromkeys(("items", "prefixItems", "minItems", "maxItems", "uniqueItems", "contains"), "array"),
    **dict.fromkeys(("minLength", "maxLength", "pattern", "format"), "string"),
    **dict.fromkeys(("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"), "number"),
}
CALLS = (
    ("search", {"query": "lighthouse harbour", "mode": "fts"}),
    ("search", {"query": "", "mode": "fts"}),
    ("read_note", {"path": "notes/alpha.md"}),
    ("read_note", {"path": "notes/alpha.md", "section": "Setup"}),
    ("related", {"path": "notes/alpha.md", "depth": 2}),
    ("status", {}),
    ("modes", {}),
)


def strict_problems(schema: Any, where: str = "#") -> Iterator[str]:
    """What Ajv's strict mode would refuse in ``schema`` and its subschemas."""
    if not isinstance(schema, dict):
        return
    for key in schema:
        if key not in KEYWORDS:
            yield f"{where}: unknown keyword {key!r}"
    types = schema.get("type")
    declared = set(types if isinstance(types, list) else [types] if types else [])
    for key, kind in FOR_TYPE.items():
        fits = kind in declared or (kind == "number" and "integer" in declared)
        if key in schema and not fits:
            yield f"{where}: {key!r} without type {kind!r}"
    for name in schema.get("required", []):
        if name not in schema.get("properties", {}):
            yield f"{where}: required {name!r} not in properties"
    for key in ("properties", "patternProperties", "$defs", "dependentSchemas"):
        for name, sub in (schema.get(key) or {}).items():
            yield from strict_problems(sub, f"{where}/{key}/{name}")
    for key in ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames"):
        yield from strict_problems(schema.get(key), f"{where}/{key}")
    for key in ("allOf", "anyOf", "oneOf", "prefixItems"):
        for i, sub in enumerate(schema.get(key) or []):
            yield from strict_problems(sub, f"{where}/{key}/{i}")


def refs(schema: Any) -> Iterator[str]:
    if isinstance(schema, dict):
        if isinstance(schema.get("$ref"), str):
            yield schema["$ref"]
        for v in schema.values():
            yield from refs(v)
    elif isinstance(schema, list):
        for v in schema:
            yield from refs(v)


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """serverInfo, the listed tools and the real calls' results, through the SDK's client."""
    from mcp import Client

    base = tmp_path_factory.mktemp("schemas")
    vault = make_serve_vault(base / "vault", base / "outside")
    build_index(vault)

    async def go() -> dict[str, Any]:
        async with Client(build_server(Tools(ServeConfig(vault)))) as client:
            listed = (await client.list_tools()).tools
            results = [(name, args, await client.call_tool(name, args)) for name, args in CALLS]
            return {"info": client.server_info, "tools": listed, "results": results}

    return asyncio.run(go())


def test_server_info_has_a_name_and_a_version(session):
    assert session["info"].name == "vaultsearch" and session["info"].version


def test_every_schema_is_draft_2020_12_with_type_object_and_strict_clean(session):
    assert {t.name for t in session["tools"]} == {"search", "read_note", "related", "status", "modes"}
    for tool in session["tools"]:
        assert tool.description and tool.title
        for kind, schema in (("inputSchema", tool.input_schema), ("outputSchema", tool.output_schema)):
            assert schema is not None, (tool.name, kind)
            Draft202012Validator.check_schema(schema)
            assert schema["type"] == "object", (tool.name, kind)
            assert list(strict_problems(schema)) == [], (tool.name, kind)
            resolver = Registry().with_resource("urn:tool", DRAFT202012.create_resource(schema)).resolver("urn:tool")
            for ref in refs(schema):
                resolver.lookup(ref)  # raises on an unresolvable $ref


def test_every_input_property_is_described(session):
    for tool in session["tools"]:
        for name, prop in tool.input_schema.get("properties", {}).items():
            assert prop.get("description"), (tool.name, name)


def test_every_structured_result_validates_against_its_output_schema(session):
    schemas = {t.name: t.output_schema for t in session["tools"]}
    for name, args, result in session["results"]:
        assert not result.is_error, (name, args, result.content[0].text[:300])
        errors = [e.message for e in Draft202012Validator(schemas[name]).iter_errors(result.structured_content)]
        assert errors == [], (name, args, errors[:3])


def test_the_rules_catch_what_strict_mode_refuses():
    bad = {"type": "object", "required": ["a"], "properties": {"b": {"type": "string", "minimum": 1, "nullable": True}}}
    assert sorted(strict_problems(bad)) == [
        "#/properties/b: 'minimum' without type 'number'",
        "#/properties/b: unknown keyword 'nullable'",
        "#: required 'a' not in properties",
    ]
