"""The Python `mcp` SDK client's side of the MCP round-trip benchmark.

Usage:
  python3 py_client_roundtrip.py stdio N C COMMAND [ARGS...]   spawn a stdio server and call it
  python3 py_client_roundtrip.py http N C URL                  call a streamable HTTP server

Calls the server's `echo` tool N times over one session (after a short warm-up), with C calls
in flight at a time (C=1: one after another), and prints one JSON line:
{"calls", "calls_per_sec", "p50_us", "p99_us", "cpu_us_per_call"} (the client process's own CPU
time, user and system, over the measured calls). The Rust bench (`mcp_roundtrip.rs`) runs this
against the same server in the same run.
"""

import asyncio
import json
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client

WARMUP = 50


async def drive(session: ClientSession, calls: int, concurrency: int) -> dict:
    await session.initialize()
    for i in range(WARMUP):
        await session.call_tool("echo", {"message": f"warm {i}"})
    latencies = []

    async def worker(first: int) -> None:
        for i in range(first, calls, concurrency):
            t0 = time.perf_counter()
            result = await session.call_tool("echo", {"message": f"call {i}"})
            latencies.append(time.perf_counter() - t0)
            if result.isError:
                raise SystemExit(f"call {i} failed: {result}")

    started = time.perf_counter()
    cpu_started = time.process_time()
    await asyncio.gather(*(worker(w) for w in range(concurrency)))
    total = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    latencies.sort()

    def percentile(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(len(latencies) * p))] * 1e6

    return {
        "calls": calls,
        "calls_per_sec": calls / total,
        "p50_us": percentile(0.50),
        "p99_us": percentile(0.99),
        "cpu_us_per_call": cpu * 1e6 / calls,
    }


async def main() -> None:
    mode, calls, concurrency = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    target = sys.argv[4:]
    if mode == "stdio":
        params = StdioServerParameters(command=target[0], args=target[1:])
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                stats = await drive(session, calls, concurrency)
    elif mode == "http":
        async with streamablehttp_client(target[0]) as (read, write, _):
            async with ClientSession(read, write) as session:
                stats = await drive(session, calls, concurrency)
    else:
        raise SystemExit(f"unknown mode {mode!r}; use stdio or http")
    print(json.dumps(stats), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
