"""Checks tool declarations with the providers' own Python packages.

Reads {"dialect": [tool, ...], ...} as wire_tools wrote them from argv[1] and exits non-zero,
naming each tool that fails, when:
- gemini: a declaration is not a google-genai FunctionDeclaration (its pydantic models forbid
  unknown fields, so a JSON Schema keyword outside Gemini's subset fails);
- openai-strict / openai-responses: the OpenAI SDK's strict-schema pass would change the
  schema (it adds what strict mode requires), or an object lacks additionalProperties: false
  or does not list every property in required;
- openai-responses, a freeform (custom) tool: it is not the SDK's CustomToolParam (checked
  with pydantic, unknown keys refused), or its format is not a Lark or regex grammar;
- anthropic: the rules the Messages API states and enforces (its SDK's ToolParam types do
  not validate): a name matching ^[a-zA-Z0-9_-]{1,128}$, only the keys a custom tool takes,
  an input_schema of type object without oneOf, anyOf or allOf at the top level.
"""

import copy
import json
import re
import sys

import pydantic
from google.genai import types
from openai.lib._pydantic import _ensure_strict_json_schema
from openai.types.responses import CustomToolParam

CUSTOM_TOOL = pydantic.TypeAdapter(CustomToolParam)


def custom_problems(tool):
    problems = [f"unknown key {key}" for key in tool if key not in CustomToolParam.__annotations__]
    try:
        CUSTOM_TOOL.validate_python(tool)
    except pydantic.ValidationError as e:
        problems.append(str(e))
    grammar = tool.get("format", {})
    if grammar.get("type") != "grammar" or not grammar.get("definition", "").strip():
        problems.append(f"format is not a grammar: {grammar}")
    return problems


ANTHROPIC_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
ANTHROPIC_KEYS = {"name", "description", "input_schema", "cache_control", "type"}


def anthropic_problems(tool):
    problems = [f"unknown key {key}" for key in tool if key not in ANTHROPIC_KEYS]
    if not ANTHROPIC_NAME.match(tool.get("name", "")):
        problems.append("name does not match ^[a-zA-Z0-9_-]{1,128}$")
    schema = tool.get("input_schema")
    if not isinstance(schema, dict) or schema.get("type") != "object":
        problems.append("input_schema.type is not object")
    else:
        problems += [f"input_schema has {k} at the top level" for k in ("oneOf", "anyOf", "allOf") if k in schema]
    return problems


def strict_problems(schema, path="$"):
    problems = []
    if isinstance(schema, dict):
        if schema.get("type") == "object" or "properties" in schema:
            if schema.get("additionalProperties") is not False:
                problems.append(f"{path}: additionalProperties is not false")
            props = list(schema.get("properties", {}))
            if sorted(props) != sorted(schema.get("required", [])):
                problems.append(f"{path}: required {schema.get('required')} != {props}")
        for key, value in schema.items():
            problems += strict_problems(value, f"{path}.{key}")
    elif isinstance(schema, list):
        for i, value in enumerate(schema):
            problems += strict_problems(value, f"{path}[{i}]")
    return problems


def main():
    with open(sys.argv[1]) as f:
        dialects = json.load(f)
    failures = []
    checked = 0
    for tool in dialects.get("gemini", []):
        try:
            types.FunctionDeclaration.model_validate(tool)
            types.Tool.model_validate({"functionDeclarations": [tool]})
        except Exception as e:  # pydantic's ValidationError names the field
            failures.append(f"gemini {tool.get('name')}: {e}")
        checked += 1
    for dialect in ("openai-strict", "openai-responses"):
        for tool in dialects.get(dialect, []):
            if dialect == "openai-responses" and tool.get("type") == "custom":
                failures += [f"{dialect} {tool.get('name')}: {p}" for p in custom_problems(tool)]
                checked += 1
                continue
            function = tool.get("function", tool)
            schema = function["parameters"]
            if function.get("strict") is not True:
                failures.append(f"{dialect} {function['name']}: not strict")
            again = _ensure_strict_json_schema(copy.deepcopy(schema), path=(), root=copy.deepcopy(schema))
            if again != schema:
                failures.append(f"{dialect} {function['name']}: the SDK's strict pass changes it:\n  {json.dumps(schema)}\n  {json.dumps(again)}")
            failures += [f"{dialect} {function['name']}: {p}" for p in strict_problems(schema)]
            checked += 1
    for tool in dialects.get("anthropic", []):
        failures += [f"anthropic {tool.get('name')}: {p}" for p in anthropic_problems(tool)]
        checked += 1
    for failure in failures:
        print(failure)
    print(f"checked {checked} declarations, {len(failures)} failures")
    sys.exit(1 if failures else 0)


main()
