"""The Python `mcp` SDK client against `toolbelt serve --knowledge PATH`.

    python3 py_knowledge.py stdio TOOLBELT serve --knowledge docs ...
    python3 py_knowledge.py http URL

Lists the tools, calls knowledge_search, agentic_knowledge_search with a filter on an
undeclared field and with a good one; prints one JSON object.
"""

import asyncio
import json
import os
import sys
from contextlib import asynccontextmanager

from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client

TRANSPORT = sys.argv[1]
TARGET = sys.argv[2:]


@asynccontextmanager
async def connect():
    if TRANSPORT == "stdio":
        params = StdioServerParameters(command=TARGET[0], args=TARGET[1:], env=dict(os.environ))
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session
    else:
        async with streamablehttp_client(TARGET[0]) as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


def result(call: types.CallToolResult) -> dict:
    text = "".join(c.text for c in call.content if isinstance(c, types.TextContent))
    return {"isError": bool(call.isError), "text": text}


async def main():
    async with connect() as session:
        listed = await session.list_tools()
        report = {"tools": [t.name for t in listed.tools]}
        report["search"] = result(
            await session.call_tool("knowledge_search", {"query": "roll back a release"})
        )
        report["bad_filter"] = result(
            await session.call_tool(
                "agentic_knowledge_search",
                {"query": "rollback", "filter": {"source": {"$where": "1=1"}}},
            )
        )
        report["filtered"] = result(
            await session.call_tool(
                "agentic_knowledge_search",
                {"query": "rollback", "filter": {"kind": "markdown"}},
            )
        )
    print(json.dumps(report))


asyncio.run(main())
