"""The Python `mcp` SDK client against replicas of `toolbelt serve --http` behind a proxy.

Usage:
    py_replicas.py sequence URL EDITS   one session: Read then Edit of seq.txt, EDITS times;
                                        halfway it prints KILL and waits for a line on stdin
                                        (the test kills a replica then)
    py_replicas.py race URL CLIENTS ROUNDS
                                        CLIENTS sessions; each round all Read race.txt, then
                                        all Edit the line they read at once
    py_replicas.py notifications URL    one session against `serve --defer-tools` aggregating
                                        the fixture server: tool_search, then the tool lists,
                                        then a subscription to memo://greeting, `touch`, an
                                        unsubscribe and `touch` again; counts what arrived on
                                        the GET stream
    py_replicas.py asked_at_once URL    one session against `serve` aggregating the fixture
                                        server: summarize, and while its sampling request
                                        waits for the client's answer, ask_profile, so two
                                        replicas ask the client at the same moment

Set TOOLBELT_TEST_TOKEN to send `Authorization: Bearer <token>`. Each prints one JSON object
on its last line of stdout; the Rust test (serve_replicas.rs) asserts on it.
"""

import asyncio
import json
import os
import sys
import time
from contextlib import AsyncExitStack, asynccontextmanager

from mcp import ClientSession, types
from mcp.client.streamable_http import streamablehttp_client

SCENARIO = sys.argv[1]
URL = sys.argv[2]


@asynccontextmanager
async def connect(**callbacks):
    headers = {}
    token = os.environ.get("TOOLBELT_TEST_TOKEN")
    if token:
        headers["Authorization"] = f"Bearer {token}"
    async with streamablehttp_client(URL, headers=headers) as (read, write, session_id):
        async with ClientSession(read, write, **callbacks) as session:
            await session.initialize()
            yield session, session_id


def text_of(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def call(session, name, arguments):
    result = await session.call_tool(name, arguments)
    return {"ok": not result.isError, "text": text_of(result)}


def first_line(read_text: str) -> str:
    """The text of the first line Read showed (`     1\\tLINE`)."""
    return read_text.splitlines()[0].split("\t", 1)[1]


async def sequence(edits: int):
    results = []
    async with connect() as (session, session_id):
        sid = session_id()
        for i in range(edits):
            if i == edits // 2:
                print("KILL", flush=True)
                await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
            read = await call(session, "Read", {"file_path": "seq.txt"})
            edit = await call(
                session,
                "Edit",
                {"file_path": "seq.txt", "old_string": "END", "new_string": f"edit {i}\nEND"},
            )
            results.append({"read": read["ok"], "edit": edit["ok"], "text": edit["text"]})
        same_session = session_id() == sid
    print(json.dumps({"session": sid, "same_session": same_session, "results": results}))


async def race(clients: int, rounds: int):
    outcomes = []
    async with AsyncExitStack() as stack:
        sessions = [await stack.enter_async_context(connect()) for _ in range(clients)]
        for _ in range(rounds):
            reads = await asyncio.gather(
                *(call(s, "Read", {"file_path": "race.txt"}) for s, _ in sessions)
            )
            edits = []
            for k, ((session, _), read) in enumerate(zip(sessions, reads)):
                line = first_line(read["text"])
                count = int(line.split()[1])
                edits.append(
                    call(
                        session,
                        "Edit",
                        {
                            "file_path": "race.txt",
                            "old_string": line,
                            "new_string": f"count: {count + 1} by {k}",
                        },
                    )
                )
            outcomes.append(await asyncio.gather(*edits))
    print(json.dumps({"rounds": outcomes}))


async def notifications():
    changed = asyncio.Event()
    updated = asyncio.Event()
    report = {"list_changed": 0, "updated": []}

    async def on_message(message):
        if not isinstance(message, types.ServerNotification):
            return
        if isinstance(message.root, types.ToolListChangedNotification):
            report["list_changed"] += 1
            changed.set()
        elif isinstance(message.root, types.ResourceUpdatedNotification):
            report["updated"].append(str(message.root.params.uri))
            updated.set()

    async def tool_names(session):
        return sorted(t.name for t in (await session.list_tools()).tools)

    async with connect(message_handler=on_message) as (session, _):
        # Reads go to the replicas in turn: two in a row connected means both are up.
        deadline = time.monotonic() + 60
        connected_in_a_row = 0
        while connected_in_a_row < 2:
            read = await session.read_resource("toolbelt://status")
            servers = json.loads(read.contents[0].text)["servers"]
            up = all(s["state"] == "connected" for s in servers)
            connected_in_a_row = connected_in_a_row + 1 if up else 0
            if time.monotonic() > deadline:
                raise RuntimeError(f"the aggregated server never came up: {servers}")
            if not up:
                await asyncio.sleep(0.1)
        report["before"] = await tool_names(session)
        # Changes announced while the aggregated servers came up (each replica checks its
        # tools every 0.5 s) do not count.
        await asyncio.sleep(1.5)
        report["list_changed"] = 0
        changed.clear()
        report["search"] = await call(session, "tool_search", {"query": "adds two integers", "limit": 1})
        await asyncio.wait_for(changed.wait(), timeout=30)
        report["after"] = [await tool_names(session) for _ in range(2)]

        await session.subscribe_resource("memo://greeting")
        report["touched"] = await call(session, "touch", {"uri": "memo://greeting"})
        await asyncio.wait_for(updated.wait(), timeout=30)
        await session.unsubscribe_resource("memo://greeting")
        # The replica holding the subscription ends it when the message reaches it.
        deadline = time.monotonic() + 30
        while True:
            report["after_unsubscribe"] = await call(session, "touch", {"uri": "memo://greeting"})
            if report["after_unsubscribe"]["text"] == "not subscribed" or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
    print(json.dumps(report))


async def asked_at_once():
    # The SDK handles the server's requests one at a time, in the order they arrive.
    report = {"ids": []}
    sampling = asyncio.Event()

    async def on_elicitation(context, _params):
        report["ids"].append(context.request_id)
        return types.ElicitResult(action="accept", content={"name": "Ada", "age": 36})

    async def on_sampling(context, params):
        report["ids"].append(context.request_id)
        sampling.set()
        # Meanwhile ask_profile starts, and the other replica sends its elicitation request:
        # this answer then reaches a replica that awaits an answer of its own.
        await asyncio.sleep(1.5)
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="summary of " + params.messages[0].content.text),
            model="client-model",
            stopReason="endTurn",
        )

    async with connect(elicitation_callback=on_elicitation, sampling_callback=on_sampling) as (session, _):
        summary = asyncio.create_task(call(session, "summarize", {"text": "two replicas"}))
        await asyncio.wait_for(sampling.wait(), timeout=30)
        report["profile"] = await call(session, "ask_profile", {})
        report["summary"] = await summary
    print(json.dumps(report))


if SCENARIO == "sequence":
    asyncio.run(sequence(int(sys.argv[3])))
elif SCENARIO == "race":
    asyncio.run(race(int(sys.argv[3]), int(sys.argv[4])))
elif SCENARIO == "notifications":
    asyncio.run(notifications())
elif SCENARIO == "asked_at_once":
    asyncio.run(asked_at_once())
else:
    sys.exit(f"unknown scenario {SCENARIO}")
