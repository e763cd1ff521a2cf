"""Reading and inspecting the JSON Schema documents event types carry."""

import pytest

from app.registry.json_schema import (
    SchemaTextInvalid,
    has_field,
    meta_schema_problem,
    parse_schema_text,
    pointer,
    ref_cycle,
    ref_problems,
    walk,
)


def test_parse_schema_text_returns_the_object():
    assert parse_schema_text('{"type": "object"}') == {"type": "object"}


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "is not valid JSON"),
        ("{", "is not valid JSON"),
        ('"schema"', "must be a JSON object"),
        ("[]", "must be a JSON object"),
        ('{"maximum": Infinity}', "is not valid JSON .*column 13"),
        # As request bodies are read: json.loads took these for infinity (and the enum
        # then refused every event, naming [None]).
        ('{"maximum": 1e999}', "is not valid JSON .*infinity"),
        ('{"enum": [-1e999]}', "is not valid JSON .*infinity"),
        ('{"title": "\\ud800"}', "is not valid JSON .*surrogate"),
        ('{"a": ' * 101 + "1" + "}" * 101, "nested more than 100 levels"),
        ("[" * 50_000 + "]" * 50_000, "nested more than 100 levels"),
    ],
)
def test_parse_schema_text_says_what_is_wrong(text, reason):
    with pytest.raises(SchemaTextInvalid, match=reason):
        parse_schema_text(text)


def test_pointer_escapes_json_pointer_characters():
    assert pointer([]) == "#"
    assert pointer(["properties", "a/b~c", 0]) == "#/properties/a~1b~0c/0"


def test_walk_visits_schema_positions_only():
    schema = {
        "properties": {"a": {"items": [{"not": {}}]}},
        "enum": [{"not": 1}],
        "default": {"properties": {}},
        "dependencies": {"a": ["b"], "c": {"title": "x"}},
    }
    paths = [path for path, _ in walk(schema)]
    assert paths == [
        (),
        ("properties", "a"),
        ("properties", "a", "items", 0),
        ("properties", "a", "items", 0, "not"),
        ("dependencies", "c"),
    ]


@pytest.mark.parametrize(
    "schema",
    [
        {},
        {"additionalProperties": True},
        {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object"},
        {"properties": {"a": {"type": ["string", "null"], "pattern": "^[a-z]+$"}}},
    ],
)
def test_valid_draft4_schemas_have_no_problem(schema):
    assert meta_schema_problem(schema) is None


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ({"type": "text"}, "at #/type: 'text' is not valid under any of the given schemas"),
        ({"required": []}, "at #/required: [] should be non-empty"),
        ({"properties": {"a": {"minimum": "1"}}}, "at #/properties/a/minimum: '1' is not of type"),
        ({"$schema": "http://json-schema.org/draft-07/schema#"}, "$schema must be the draft 4"),
    ],
)
def test_invalid_schemas_are_explained(schema, problem):
    assert problem in meta_schema_problem(schema)


def test_refs_that_resolve_inside_the_document_are_fine():
    schema = {
        "definitions": {"a": {"type": "string"}, "b": {"$ref": "#/definitions/a"}},
        "properties": {"x": {"$ref": "#/definitions/b"}, "self": {"$ref": "#"}},
    }
    assert ref_problems(schema) == []


def test_refs_follow_id_scopes():
    schema = {
        "properties": {
            "inner": {
                "id": "urn:example:inner",
                "definitions": {"a": {"type": "string"}},
                "properties": {"x": {"$ref": "#/definitions/a"}},
            }
        }
    }
    assert ref_problems(schema) == []


def test_refs_resolve_against_the_root_id():
    schema = {
        "id": "https://example.com/schemas/order.json",
        "definitions": {"a": {"type": "string"}},
        "properties": {
            "x": {"$ref": "#/definitions/a"},
            "y": {"$ref": "order.json#/definitions/a"},
        },
    }
    assert ref_problems(schema) == []
    assert has_field(
        {
            **schema,
            "properties": {"x": {"$ref": "#/definitions/o"}},
            "definitions": {"o": {"properties": {"z": {}}}},
        },
        "x.z",
    )


TREE = {
    "definitions": {
        "node": {
            "properties": {"children": {"type": "array", "items": {"$ref": "#/definitions/node"}},
                           "parent": {"$ref": "#/definitions/node"}},
        }
    },
    "properties": {"root": {"$ref": "#/definitions/node"}, "self": {"$ref": "#"}},
}


@pytest.mark.parametrize(
    "schema",
    [
        TREE,
        # Shared but not circular: every chain of references ends.
        {"definitions": {"a": {"allOf": [{"$ref": "#/definitions/b"}, {"$ref": "#/definitions/b"}]},
                         "b": {"anyOf": [{"type": "string"}, {"type": "integer"}]}},
         "properties": {"x": {"$ref": "#/definitions/a"}, "y": {"$ref": "#/definitions/a"}}},
        # Draft 4 ignores what is beside a $ref, so this allOf is never reached.
        {"definitions": {"a": {"$ref": "#/definitions/b", "allOf": [{"$ref": "#/definitions/a"}]},
                         "b": {"type": "string"}},
         "properties": {"x": {"$ref": "#/definitions/a"}}},
    ],
)
def test_references_that_go_into_the_event_or_end_are_no_cycle(schema):
    assert ref_cycle(schema) is None


@pytest.mark.parametrize(
    ("schema", "where"),
    [
        ({"definitions": {"a": {"$ref": "#/definitions/a"}},
          "properties": {"x": {"$ref": "#/definitions/a"}}}, "#/definitions/a"),
        ({"$ref": "#"}, "#"),
        ({"allOf": [{"$ref": "#"}]}, "#"),
        ({"properties": {"x": {"anyOf": [{"type": "string"}, {"$ref": "#/properties/x"}]}}},
         "#/properties/x"),
        ({"definitions": {"a": {"not": {"$ref": "#/definitions/b"}},
                          "b": {"oneOf": [{"$ref": "#/definitions/a"}]}}},
         "#/definitions/a"),
        ({"dependencies": {"x": {"$ref": "#"}}}, "#"),
        # A long chain that closes: found without recursing once per link.
        ({"definitions": {**{f"d{i}": {"$ref": f"#/definitions/d{i + 1}"} for i in range(5000)},
                          "d5000": {"$ref": "#/definitions/d0"}}}, "#/definitions/d"),
        # Inside an id's scope, "#" is the scope's root.
        ({"properties": {"inner": {"id": "urn:example:inner", "allOf": [{"$ref": "#"}]}}},
         "#/properties/inner"),
    ],
)
def test_references_that_lead_back_without_going_into_the_event_are_a_cycle(schema, where):
    assert ref_problems(schema) == []
    problem = ref_cycle(schema)
    assert problem is not None
    assert f"the schema at {where}" in problem
    assert "would never end" in problem


def test_refs_that_do_not_resolve_are_listed():
    schema = {
        "properties": {
            "a": {"$ref": "#/definitions/missing"},
            "b": {"$ref": "http://example.com/schema.json"},
            "c": {"$ref": "other.json#/x"},
        }
    }
    assert ref_problems(schema) == [
        f"$ref {ref!r} at #/properties/{name} does not resolve (only references inside the "
        "schema can)"
        for name, ref in (("a", "#/definitions/missing"), ("b", "http://example.com/schema.json"),
                          ("c", "other.json#/x"))
    ]


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ({"properties": {"a": {"$ref": 5}}},
         "$ref at #/properties/a must be a string (a URI reference), not 5"),
        ({"not": {"$ref": None}}, "$ref at #/not must be a string (a URI reference), not null"),
        ({"required": ["a"], "properties": {"a": {"$ref": "#/required"}}},
         "$ref '#/required' at #/properties/a leads to [\"a\"], not a schema"),
        ({"title": "t", "properties": {"a": {"$ref": "#/title"}}},
         "$ref '#/title' at #/properties/a leads to \"t\", not a schema"),
        ({"id": "http://[::1", "definitions": {"q": {}},
          "properties": {"a": {"$ref": "#/definitions/q"}}},
         "the id at # is not a URI (Invalid IPv6 URL)"),
        ({"id": "http://[x", "properties": {"a": {"type": "string"}}},
         "the id at # is not a URI (Invalid IPv6 URL)"),
    ],
)
def test_refs_a_validator_could_not_follow_are_refused(schema, problem):
    """Each of these used to pass, and then fail every event that reached it with a 500."""
    assert ref_problems(schema) == [problem]
    assert not has_field(schema, "a.b")


SCHEMA_WITH_FIELDS = {
    "definitions": {"customer": {"properties": {"id": {"type": "string"}}}},
    "properties": {
        "order": {"properties": {"number": {"type": "string"}}},
        "customer": {"$ref": "#/definitions/customer"},
        "tree": {"$ref": "#"},
    },
    "oneOf": [{"properties": {"variant": {}}}],
}


@pytest.mark.parametrize(
    ("path", "exists"),
    [
        ("order", True),
        ("order.number", True),
        ("customer.id", True),
        ("variant", True),
        ("tree.tree.order.number", True),
        ("order.missing", False),
        ("missing", False),
        ("", False),
        ("order.", False),
        (".order", False),
        ("definitions", False),
        ("tree.tree.tree.tree.nope", False),
    ],
)
def test_has_field(path, exists):
    assert has_field(SCHEMA_WITH_FIELDS, path) is exists


def test_has_field_survives_reference_cycles():
    assert (
        has_field(
            {"definitions": {"a": {"$ref": "#/definitions/a"}}, "$ref": "#/definitions/a"}, "x"
        )
        is False
    )
