"""The tool set offered to the model: names, order, specs, access, paths()."""

from __future__ import annotations

import msgspec
import pytest
from musec.agents.core.conversation import ToolSpec
from musec.agents.tools import Tool, default_tools, tool_by_name

EXPECTED = [
    ("read_file", "read", ["path"]),
    ("write_file", "write", ["path", "content"]),
    ("edit_file", "write", ["path", "old_string", "new_string"]),
    ("glob", "read", ["pattern"]),
    ("grep", "read", ["pattern"]),
    ("bash", "execute", ["command"]),
]


def test_default_tools_order_access_and_required_inputs() -> None:
    tools = default_tools()
    assert [(t.name, t.access, t.spec.input_schema["required"]) for t in tools] == EXPECTED


@pytest.mark.parametrize("tool", default_tools(), ids=lambda t: t.name)
def test_specs_are_complete_json_schemas(tool: Tool) -> None:
    spec = tool.spec
    assert isinstance(spec, ToolSpec) and spec.name == tool.name
    assert len(spec.description) > 80
    schema = spec.input_schema
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert set(schema["required"]) <= set(schema["properties"])
    for prop in schema["properties"].values():
        assert prop["type"] in ("string", "integer", "number", "boolean") and prop["description"]
    assert msgspec.json.decode(msgspec.json.encode(spec), type=ToolSpec) == spec


def test_paths() -> None:
    by_name = {t.name: t for t in default_tools()}
    assert by_name["read_file"].paths({"path": "a.txt"}) == ["a.txt"]
    assert by_name["edit_file"].paths({"path": 3}) == []
    assert by_name["glob"].paths({"pattern": "*"}) == ["."]
    assert by_name["grep"].paths({"pattern": "x", "path": "src"}) == ["src"]
    assert by_name["bash"].paths({"command": "ls"}) == []


def test_tool_by_name() -> None:
    assert tool_by_name("grep").name == "grep"
    assert tool_by_name("nope") is None
    mine = default_tools()[:1]
    assert tool_by_name("read_file", mine) is mine[0]
    assert tool_by_name("bash", mine) is None
