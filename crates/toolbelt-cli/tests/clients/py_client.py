"""An independent MCP client (the Python `mcp` SDK) driving `toolbelt serve`.

Usage:
    py_client.py SCENARIO stdio COMMAND [ARGS...]
    py_client.py SCENARIO http URL

Set TOOLBELT_TEST_TOKEN to send `Authorization: Bearer <token>` over HTTP, and
TOOLBELT_TEST_DIR to the served directory (the `cancel` scenario waits for files there).

Scenarios (each prints one JSON object on stdout; the Rust test asserts on it):
    tour          list the tools; call Read, Grep, an aggregated server's tools, Read with
                  invalid arguments and an unknown tool
    progress      call a slow Bash command with a progress callback; report the notifications
    cancel        start a long Bash command, send notifications/cancelled for it, then call
                  Read on the same session; report the command's process ids
    list_changed  have an aggregated server add a tool; wait for tools/list_changed; list again
    cancel_aggregated  start the aggregated Python server's `sleep`, cancel it, and wait for
                  the marker file that server writes when its call is cancelled
    streaming     call the `count` streaming tool with a progress callback and the typed
                  `stats` tool (output schema) of toolbelt-mcp's in-process server test
    silent        time initialize and tools/list (an aggregated server never answers); read
                  the status resource
    relay         through serve aggregating the Python fixture server: logging level,
                  progress and log messages of a call, resources, templates, a subscription
                  and its update, prompts, completions, content annotations

Every scenario but `silent` first waits (reading `toolbelt://status`) until the aggregated
servers, which serve connects in the background, are up.
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


async def upstream_status(session):
    """The aggregated servers as `toolbelt://status` lists them."""
    read = await session.read_resource("toolbelt://status")
    return json.loads(read.contents[0].text)["servers"]


async def wait_for_upstreams(session, limit=60.0):
    """Waits until every aggregated server has connected or failed once (serve connects them
    in the background), so a scenario sees their tools."""
    if not session.get_server_capabilities().resources:
        return
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        servers = await upstream_status(session)
        if all(s["state"] != "connecting" or s.get("attempt", 1) > 1 for s in servers):
            return
        await asyncio.sleep(0.1)
    raise RuntimeError(f"the aggregated servers never came up: {servers}")


@asynccontextmanager
async def connect(message_handler=None, logging_callback=None, wait=True):
    kwargs = {"message_handler": message_handler, "logging_callback": logging_callback}
    if TRANSPORT == "stdio":
        params = StdioServerParameters(command=TARGET[0], args=TARGET[1:], env=dict(os.environ))
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, **kwargs) as session:
                await session.initialize()
                if wait:
                    await wait_for_upstreams(session)
                yield session
    else:
        headers = {}
        token = os.environ.get("TOOLBELT_TEST_TOKEN")
        if token:
            headers["Authorization"] = f"Bearer {token}"
        async with streamablehttp_client(TARGET[0], headers=headers) as (read, write, _):
            async with ClientSession(read, write, **kwargs) as session:
                await session.initialize()
                if wait:
                    await wait_for_upstreams(session)
                yield session


def describe(result: types.CallToolResult) -> dict:
    return {
        "is_error": bool(result.isError),
        "text": "".join(c.text for c in result.content if isinstance(c, types.TextContent)),
        "structured": result.structuredContent,
        "types": [c.type for c in result.content],
    }


async def call(session, name, arguments):
    try:
        return describe(await session.call_tool(name, arguments))
    except McpError as err:
        return {"rpc_error": {"code": err.error.code, "message": err.error.message}}


async def tour():
    async with connect() as session:
        init = session.get_server_capabilities()
        listed = await session.list_tools()
        tools = {}
        for tool in listed.tools:
            a = tool.annotations
            tools[tool.name] = {
                "read_only": a.readOnlyHint if a else None,
                "destructive": a.destructiveHint if a else None,
                "idempotent": a.idempotentHint if a else None,
                "open_world": a.openWorldHint if a else None,
                "has_output_schema": tool.outputSchema is not None,
            }
        return {
            "list_changed_capability": bool(init and init.tools and init.tools.listChanged),
            "tools": tools,
            "read": await call(session, "Read", {"file_path": "hello.txt"}),
            "grep": await call(session, "Grep", {"pattern": "needle", "output_mode": "content"}),
            "echo": await call(session, "echo", {"message": "through toolbelt"}),
            "py_echo": await call(session, "py_echo", {"message": "prefixed"}),
            "weather": await call(session, "weather", {"city": "Oslo"}),
            "image": await call(session, "get-tiny-image", {}),
            "links": await call(session, "get-resource-links", {"count": 2}),
            "read_invalid": await call(session, "Read", {"file_path": 42}),
            "read_missing": await call(session, "Read", {"file_path": "no/such/file.txt"}),
            "unknown": await call(session, "NoSuchTool", {}),
        }


async def progress():
    updates = []

    async def on_progress(value, total, message):
        updates.append({"progress": value, "total": total, "message": message})

    async with connect() as session:
        result = await session.call_tool(
            "Bash", {"command": "sleep 2; echo done"}, progress_callback=on_progress
        )
        return {"result": describe(result), "updates": updates}


async def wait_for_file(path, limit=30.0):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if os.path.exists(path) and open(path).read().strip():
            return open(path).read().strip()
        await asyncio.sleep(0.05)
    raise RuntimeError(f"{path} never appeared")


async def cancel():
    workdir = os.environ["TOOLBELT_TEST_DIR"]
    command = "sleep 300 & echo $! > sleep.pid; echo $$ > shell.pid; wait"
    async with connect() as session:
        # The SDK numbers requests from 0 and does not send notifications/cancelled itself
        # when a call is abandoned, so note the id this call will get and send it by hand.
        request_id = session._request_id
        outcome = {}

        async def long_call():
            try:
                outcome["result"] = describe(await session.call_tool("Bash", {"command": command}))
            except McpError as err:
                outcome["rpc_error"] = err.error.message

        async with anyio.create_task_group() as group:
            group.start_soon(long_call)
            sleep_pid = await wait_for_file(os.path.join(workdir, "sleep.pid"))
            shell_pid = await wait_for_file(os.path.join(workdir, "shell.pid"))
            await session.send_notification(
                types.ClientNotification(
                    types.CancelledNotification(
                        params=types.CancelledNotificationParams(
                            requestId=request_id, reason="the test cancelled it"
                        )
                    )
                )
            )
            # A cancelled request gets no response; stop waiting for one.
            await asyncio.sleep(0.5)
            group.cancel_scope.cancel()
        after = await call(session, "Read", {"file_path": "hello.txt"})
        return {
            "sleep_pid": int(sleep_pid),
            "shell_pid": int(shell_pid),
            "outcome": outcome,
            "read_after_cancel": after,
        }


async def cancel_aggregated():
    marker = os.path.join(os.environ["TOOLBELT_TEST_DIR"], "cancelled.marker")
    async with connect() as session:
        request_id = session._request_id
        outcome = {}

        async def long_call():
            try:
                outcome["result"] = describe(await session.call_tool("sleep", {"seconds": 120}))
            except McpError as err:
                outcome["rpc_error"] = err.error.message

        async with anyio.create_task_group() as group:
            group.start_soon(long_call)
            # Give the call time to reach the aggregated server (nothing to wait on there).
            await asyncio.sleep(1.5)
            await session.send_notification(
                types.ClientNotification(
                    types.CancelledNotification(
                        params=types.CancelledNotificationParams(requestId=request_id)
                    )
                )
            )
            await wait_for_file(marker)
            group.cancel_scope.cancel()
        return {"marker": open(marker).read(), "outcome": outcome}


async def list_changed():
    changed = asyncio.Event()

    async def on_message(message):
        if isinstance(message, types.ServerNotification) and isinstance(
            message.root, types.ToolListChangedNotification
        ):
            changed.set()

    async with connect(message_handler=on_message) as session:
        before = sorted(t.name for t in (await session.list_tools()).tools)
        added = await call(session, "add_tool", {"name": "late_tool"})
        await asyncio.wait_for(changed.wait(), timeout=30)
        after = sorted(t.name for t in (await session.list_tools()).tools)
        late = await call(session, "late_tool", {})
        return {"before": before, "added": added, "after": after, "late": late}


async def streaming():
    updates = []

    async def on_progress(value, total, message):
        updates.append({"progress": value, "total": total, "message": message})

    async with connect() as session:
        listed = {t.name: t for t in (await session.list_tools()).tools}
        counted = await session.call_tool("count", {"to": 3}, progress_callback=on_progress)
        # The SDK validates structuredContent against the declared output schema.
        stats = await session.call_tool("stats", {"text": "a bb ccc"})
        return {
            "count": describe(counted),
            "updates": updates,
            "stats": describe(stats),
            "stats_has_output_schema": listed["stats"].outputSchema is not None,
            "count_has_output_schema": listed["count"].outputSchema is not None,
        }


async def silent():
    """Times initialize and tools/list with an aggregated server that never answers."""
    started = time.monotonic()
    async with connect(wait=False) as session:
        initialized = time.monotonic() - started
        started = time.monotonic()
        listed = await session.list_tools()
        listing = time.monotonic() - started
        return {
            "initialize_seconds": initialized,
            "list_seconds": listing,
            "tools": sorted(t.name for t in listed.tools),
            "status": await upstream_status(session),
        }


async def relay():
    """Everything an aggregated server offers besides tools, through serve."""
    logs = []
    updated = asyncio.Event()
    updates = []

    async def on_log(params):
        logs.append({"level": params.level, "logger": params.logger, "data": params.data})

    async def on_message(message):
        if isinstance(message, types.ServerNotification) and isinstance(
            message.root, types.ResourceUpdatedNotification
        ):
            updates.append(str(message.root.params.uri))
            updated.set()

    progress_updates = []

    async def on_progress(value, total, message):
        progress_updates.append({"progress": value, "total": total, "message": message})

    async with connect(message_handler=on_message, logging_callback=on_log) as session:
        caps = session.get_server_capabilities()
        report = {"capabilities": caps.model_dump(exclude_none=True)}
        await session.set_logging_level("debug")
        report["upstream_level"] = describe(await session.call_tool("log_level", {}))["text"]
        worked = await session.call_tool(
            "progress_and_log", {"steps": 3}, progress_callback=on_progress
        )
        report["progress_and_log"] = describe(worked)
        report["progress"] = progress_updates
        # Log notifications may trail the response a little.
        deadline = time.monotonic() + 10
        while len(logs) < 4 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        report["logs"] = logs
        resources = (await session.list_resources()).resources
        report["resources"] = [r.model_dump(by_alias=True, exclude_none=True, mode="json")
                               for r in resources]
        report["read_greeting"] = (await session.read_resource("memo://greeting")).model_dump(
            by_alias=True, exclude_none=True, mode="json")
        templates = (await session.list_resource_templates()).resourceTemplates
        report["templates"] = [t.model_dump(by_alias=True, exclude_none=True, mode="json")
                               for t in templates]
        report["read_note"] = (await session.read_resource("memo://notes/abc")).model_dump(
            by_alias=True, exclude_none=True, mode="json")
        await session.subscribe_resource("memo://greeting")
        report["touch"] = describe(await session.call_tool("touch", {"uri": "memo://greeting"}))
        await asyncio.wait_for(updated.wait(), timeout=30)
        report["updated"] = updates
        prompts = (await session.list_prompts()).prompts
        report["prompts"] = [p.model_dump(by_alias=True, exclude_none=True) for p in prompts]
        report["prompt"] = (await session.get_prompt("greet", {"name": "Ann"})).model_dump(
            by_alias=True, exclude_none=True, mode="json")
        completed = await session.complete(
            types.PromptReference(type="ref/prompt", name="greet"), {"name": "name", "value": "Al"}
        )
        report["completion"] = completed.completion.values
        annotated = await session.call_tool("annotated", {})
        report["annotated"] = annotated.model_dump(by_alias=True, exclude_none=True, mode="json")
        try:
            await session.read_resource("memo://nowhere/else")
            report["unknown_resource"] = None
        except McpError as err:
            report["unknown_resource"] = {"code": err.error.code, "message": err.error.message}
        return report


SCENARIOS = {"silent": silent, "relay": relay, "cancel_aggregated": cancel_aggregated, "streaming": streaming, "tour": tour, "progress": progress, "cancel": cancel, "list_changed": list_changed}

if __name__ == "__main__":
    report = anyio.run(SCENARIOS[SCENARIO])
    print(json.dumps(report))
