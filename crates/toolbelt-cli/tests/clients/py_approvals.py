"""A Python `mcp` SDK client calling Write through `toolbelt serve --stdio ... --ask Write`:
serve asks this client with an elicitation form before the call runs.

Usage:
    py_approvals.py SCENARIO COMMAND [ARGS...]

Scenarios (each prints one JSON object: the call's result and the questions received):
    approve   the elicitation callback accepts with approve: true
    refuse    it accepts with approve: false and a message for the model
    decline   it declines the form
    bare      the client declares no elicitation
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

SCENARIO = sys.argv[1]
COMMAND = sys.argv[2:]


async def main():
    asked = []

    async def on_elicit(context, params):
        asked.append({"message": params.message, "schema": params.requestedSchema})
        if SCENARIO == "approve":
            return types.ElicitResult(action="accept", content={"approve": True})
        if SCENARIO == "refuse":
            return types.ElicitResult(
                action="accept", content={"approve": False, "message": "not in this folder"}
            )
        return types.ElicitResult(action="decline")

    callbacks = {} if SCENARIO == "bare" else {"elicitation_callback": on_elicit}
    params = StdioServerParameters(command=COMMAND[0], args=COMMAND[1:], env=dict(os.environ))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, **callbacks) as session:
            await session.initialize()
            result = await session.call_tool(
                "Write", {"file_path": "new.txt", "content": "hello\n"}
            )
    text = "".join(c.text for c in result.content if isinstance(c, types.TextContent))
    print(json.dumps({"is_error": result.isError, "text": text, "asked": asked}))


asyncio.run(main())
