"""A Python `mcp` SDK client driving `toolbelt serve`, which aggregates the client-features
fixture server (crates/toolbelt-mcp/tests/fixtures/client_features_server.py, as `cf`): the
fixture's tools elicit, sample and list roots in the middle of a call, and serve must pass
those requests on to this client.

Usage:
    py_client_features.py SCENARIO stdio COMMAND [ARGS...]
    py_client_features.py SCENARIO http URL

TOOLBELT_TEST_TOKEN: the bearer token over HTTP.

Scenarios (each prints one JSON object on stdout; the Rust test asserts on it):
    offered   the client declares elicitation, sampling and roots callbacks; calls the
              fixture's ask_profile, ask_url, summarize and list_client_roots; reports what
              each callback received and what each tool returned; then sends
              roots/list_changed and reports how many the server heard
    bare      the client declares none of them; calls the same tools and reports the results
    two_clients  (http) a client offering elicitation connects, then a bare one; each calls
              ask_profile; reports both results and how many requests the first one's
              callback received
    sampling_tools  a client declaring sampling.tools calls the fixture's weather_agent (a
              sampling tool loop): its callback answers the first request with a tool_use,
              the next with text naming the tool_result it got; then a client declaring plain
              sampling calls it too; reports both results and what the first callback saw
"""

import asyncio
import json
import os
import sys
import time
from contextlib import asynccontextmanager

import anyio
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client
from mcp.shared.exceptions import McpError

SCENARIO = sys.argv[1]
TRANSPORT = sys.argv[2]
TARGET = sys.argv[3:]


async def wait_for_upstreams(session, limit=60.0):
    """Waits until the aggregated server is connected (serve connects it in the background)."""
    deadline = time.monotonic() + limit
    servers = None
    while time.monotonic() < deadline:
        read = await session.read_resource("toolbelt://status")
        servers = json.loads(read.contents[0].text)["servers"]
        if all(s["state"] == "connected" for s in servers):
            return
        await asyncio.sleep(0.1)
    raise RuntimeError(f"the aggregated server never came up: {servers}")


@asynccontextmanager
async def connect(**callbacks):
    if TRANSPORT == "stdio":
        params = StdioServerParameters(command=TARGET[0], args=TARGET[1:], env=dict(os.environ))
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, **callbacks) as session:
                await session.initialize()
                await wait_for_upstreams(session)
                yield session
    else:
        headers = {}
        token = os.environ.get("TOOLBELT_TEST_TOKEN")
        if token:
            headers["Authorization"] = f"Bearer {token}"
        async with streamablehttp_client(TARGET[0], headers=headers) as (read, write, _):
            async with ClientSession(read, write, **callbacks) as session:
                await session.initialize()
                await wait_for_upstreams(session)
                yield session


async def call(session, name, arguments):
    try:
        result = await session.call_tool(name, arguments)
    except McpError as err:
        return {"rpc_error": {"code": err.error.code, "message": err.error.message}}
    text = "".join(c.text for c in result.content if isinstance(c, types.TextContent))
    return {"is_error": bool(result.isError), "text": text}


async def calls(session):
    return {
        "profile": await call(session, "ask_profile", {}),
        "url": await call(session, "ask_url", {}),
        "summary": await call(session, "summarize", {"text": "a long text to shorten"}),
        "roots": await call(session, "list_client_roots", {}),
    }


async def offered():
    seen = {"elicitations": [], "samplings": [], "roots_lists": 0}

    async def on_elicitation(_context, params):
        entry = {"message": params.message, "mode": getattr(params, "mode", None)}
        if isinstance(params, types.ElicitRequestURLParams):
            entry["url"] = params.url
            seen["elicitations"].append(entry)
            return types.ElicitResult(action="decline")
        entry["schema_fields"] = sorted(params.requestedSchema["properties"])
        seen["elicitations"].append(entry)
        return types.ElicitResult(action="accept", content={"name": "Grace", "age": 85})

    async def on_sampling(_context, params):
        seen["samplings"].append({
            "messages": [m.content.text for m in params.messages],
            "system_prompt": params.systemPrompt,
            "max_tokens": params.maxTokens,
            "hints": [h.name for h in (params.modelPreferences.hints or [])],
        })
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="shortened by the client"),
            model="client-model",
            stopReason="endTurn",
        )

    async def on_roots(_context):
        seen["roots_lists"] += 1
        return types.ListRootsResult(
            roots=[types.Root(uri="file:///client/workspace/", name="client-root")]
        )

    async with connect(
        elicitation_callback=on_elicitation,
        sampling_callback=on_sampling,
        list_roots_callback=on_roots,
    ) as session:
        results = await calls(session)
        # The client's roots change: the aggregated server must hear of it.
        await session.send_roots_list_changed()
        deadline = time.monotonic() + 30
        changed = 0
        while time.monotonic() < deadline:
            changed = json.loads((await call(session, "roots_changed_count", {}))["text"])
            if changed:
                break
            await asyncio.sleep(0.1)
        results["roots_changed"] = changed
    return {"results": results, "seen": seen}


async def bare():
    async with connect() as session:
        return {"results": await calls(session)}


async def two_clients():
    asked = []

    async def on_elicitation(_context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Offering"})

    async with connect(elicitation_callback=on_elicitation) as offering:
        async with connect() as bare:
            # The bare client connected last; its call's request must not reach `offering`.
            from_bare = await call(bare, "ask_profile", {})
            asked_after_bare = len(asked)
            from_offering = await call(offering, "ask_profile", {})
    return {
        "from_bare": from_bare,
        "asked_after_bare": asked_after_bare,
        "from_offering": from_offering,
        "asked": asked,
    }


async def sampling_tools():
    seen = []

    async def on_sampling(_context, params):
        last = params.messages[-1].content_as_list
        seen.append({
            "tools": [t.name for t in (params.tools or [])],
            "mode": params.toolChoice.mode if params.toolChoice else None,
            "last": [b.model_dump(exclude_none=True, by_alias=True) for b in last],
        })
        results = [b for b in last if b.type == "tool_result"]
        if not results:
            return types.CreateMessageResultWithTools(
                role="assistant",
                content=[types.ToolUseContent(
                    type="tool_use", id="use-1", name="get_weather", input={"city": "Oslo"})],
                model="client-model",
                stopReason="toolUse",
            )
        return types.CreateMessageResultWithTools(
            role="assistant",
            content=[types.TextContent(type="text", text="read: " + results[0].content[0].text)],
            model="client-model",
            stopReason="endTurn",
        )

    tools = types.SamplingCapability(tools=types.SamplingToolsCapability())
    async with connect(sampling_callback=on_sampling, sampling_capabilities=tools) as session:
        with_tools = await call(session, "weather_agent", {"question": "Oslo?"})

    async def plain(_context, params):
        seen.append({"plain": True})
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="x"),
            model="m",
        )

    async with connect(sampling_callback=plain) as session:
        without = await call(session, "weather_agent", {"question": "Oslo?"})
    return {"with_tools": with_tools, "without": without, "seen": seen}


SCENARIOS = {
    "offered": offered,
    "bare": bare,
    "two_clients": two_clients,
    "sampling_tools": sampling_tools,
}

if __name__ == "__main__":
    report = anyio.run(SCENARIOS[SCENARIO])
    print(json.dumps(report, sort_keys=True))
