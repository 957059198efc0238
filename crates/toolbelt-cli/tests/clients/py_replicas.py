"""The Python `mcp` SDK client against replicas of `toolbelt serve --http` behind a proxy.

Usage:
    py_replicas.py sequence URL EDITS   one session: Read then Edit of seq.txt, EDITS times;
                                        halfway it prints KILL and waits for a line on stdin
                                        (the test kills a replica then)
    py_replicas.py race URL CLIENTS ROUNDS
                                        CLIENTS sessions; each round all Read race.txt, then
                                        all Edit the line they read at once

Set TOOLBELT_TEST_TOKEN to send `Authorization: Bearer <token>`. Each prints one JSON object
on its last line of stdout; the Rust test (serve_replicas.rs) asserts on it.
"""

import asyncio
import json
import os
import sys
from contextlib import AsyncExitStack, asynccontextmanager

from mcp import ClientSession, types
from mcp.client.streamable_http import streamablehttp_client

SCENARIO = sys.argv[1]
URL = sys.argv[2]


@asynccontextmanager
async def connect():
    headers = {}
    token = os.environ.get("TOOLBELT_TEST_TOKEN")
    if token:
        headers["Authorization"] = f"Bearer {token}"
    async with streamablehttp_client(URL, headers=headers) as (read, write, session_id):
        async with ClientSession(read, write) as session:
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


if SCENARIO == "sequence":
    asyncio.run(sequence(int(sys.argv[3])))
elif SCENARIO == "race":
    asyncio.run(race(int(sys.argv[3]), int(sys.argv[4])))
else:
    sys.exit(f"unknown scenario {SCENARIO}")
