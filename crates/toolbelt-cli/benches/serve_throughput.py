"""Throughput and latency of `tools/call` on `toolbelt serve`, against the reference
filesystem server from npm, driven by the same client (the Python `mcp` SDK) in the same run.

Each target reads the same small file: toolbelt's `Read` over stdio and over streamable HTTP,
and `@modelcontextprotocol/server-filesystem`'s `read_text_file` over stdio (it serves stdio
only); as an HTTP reference, `@modelcontextprotocol/server-everything`'s `echo` over streamable
HTTP (less work than a file read). For each target: a warm-up, then CALLS sequential calls (one in flight: latency p50 and
p99, calls per second), then CALLS calls with CONCURRENCY in flight (calls per second).

Usage (see BENCHMARKS.md for the full rerun command):
    python3 crates/toolbelt-cli/benches/serve_throughput.py TOOLBELT_BINARY [CALLS] [CONCURRENCY]

Never run by `cargo test`.
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import asynccontextmanager

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client

TOOLBELT = os.path.abspath(sys.argv[1])
CALLS = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
CONCURRENCY = int(sys.argv[3]) if len(sys.argv) > 3 else 8
WARMUP = 200
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "../../.."))
FILESYSTEM = os.path.join(
    ROOT, "tests/peers/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
)
EVERYTHING = os.path.join(
    ROOT, "tests/peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)


@asynccontextmanager
async def stdio_session(command, args):
    params = StdioServerParameters(command=command, args=args)
    with open(os.devnull, "w") as devnull:
        async with stdio_client(params, errlog=devnull) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


@asynccontextmanager
async def http_session(url):
    async with streamablehttp_client(url) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            yield session


def start_http_server(workdir):
    proc = subprocess.Popen(
        # Loopback without a token, as the figures before tokens became the default were.
        [TOOLBELT, "serve", "--http", "127.0.0.1:0", "--dir", workdir, "--read-only", "--no-auth"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    for line in proc.stderr:
        if line.startswith("toolbelt: serving MCP on "):
            return proc, line.split(" on ", 1)[1].strip()
    raise RuntimeError("toolbelt serve --http did not start")


def start_everything_http():
    """The npm everything server over streamable HTTP: an HTTP reference point, since the
    filesystem server serves stdio only. Its `echo` does less work than reading a file."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen(
        ["node", EVERYTHING, "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, f"http://127.0.0.1:{port}/mcp"
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the everything server did not start")


async def measure(session, tool, arguments, expect):
    first = await session.call_tool(tool, arguments)
    text = "".join(getattr(c, "text", "") for c in first.content)
    assert not first.isError and expect in text, f"{tool} answered {text!r}"
    for _ in range(WARMUP):
        await session.call_tool(tool, arguments)

    latencies = []
    started = time.perf_counter()
    for _ in range(CALLS):
        t0 = time.perf_counter()
        await session.call_tool(tool, arguments)
        latencies.append(time.perf_counter() - t0)
    sequential = CALLS / (time.perf_counter() - started)

    remaining = CALLS

    async def worker():
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await session.call_tool(tool, arguments)

    started = time.perf_counter()
    async with anyio.create_task_group() as group:
        for _ in range(CONCURRENCY):
            group.start_soon(worker)
    concurrent = CALLS / (time.perf_counter() - started)

    latencies.sort()
    return {
        "sequential": sequential,
        "concurrent": concurrent,
        "p50": statistics.median(latencies) * 1e3,
        "p99": latencies[int(len(latencies) * 0.99) - 1] * 1e3,
    }


async def main():
    results = {}
    with tempfile.TemporaryDirectory() as workdir:
        path = os.path.join(workdir, "small.txt")
        with open(path, "w") as f:
            f.write("".join(f"line {i} of a small file\n" for i in range(20)))

        async with stdio_session(TOOLBELT, ["serve", "--stdio", "--dir", workdir, "--read-only"]) as s:
            results["toolbelt serve, stdio, Read"] = await measure(
                s, "Read", {"file_path": "small.txt"}, "line 19"
            )

        proc, url = start_http_server(workdir)
        try:
            async with http_session(url) as s:
                results["toolbelt serve, streamable HTTP, Read"] = await measure(
                    s, "Read", {"file_path": "small.txt"}, "line 19"
                )
        finally:
            proc.terminate()
            proc.wait()

        async with stdio_session("node", [FILESYSTEM, workdir]) as s:
            results["server-filesystem, stdio, read_text_file"] = await measure(
                s, "read_text_file", {"path": path}, "line 19"
            )

        proc, url = start_everything_http()
        try:
            async with http_session(url) as s:
                results["server-everything, streamable HTTP, echo (HTTP reference)"] = await measure(
                    s, "echo", {"message": "line 19"}, "line 19"
                )
        finally:
            proc.terminate()
            proc.wait()

    print(f"{CALLS} calls per target after {WARMUP} warm-up calls; concurrency {CONCURRENCY}\n")
    print("| target | calls/s (1 in flight) | p50 ms | p99 ms | calls/s (%d in flight) |" % CONCURRENCY)
    print("|---|---:|---:|---:|---:|")
    for name, r in results.items():
        print(
            f"| {name} | {r['sequential']:.0f} | {r['p50']:.2f} | {r['p99']:.2f} | {r['concurrent']:.0f} |"
        )
    base = results["server-filesystem, stdio, read_text_file"]
    http_base = results["server-everything, streamable HTTP, echo (HTTP reference)"]
    http = results["toolbelt serve, streamable HTTP, Read"]
    print(
        f"\ntoolbelt serve over HTTP: {http['sequential'] / http_base['sequential']:.2f}x the "
        f"everything server's echo over HTTP (1 in flight), "
        f"{http['concurrent'] / http_base['concurrent']:.2f}x ({CONCURRENCY} in flight)"
    )
    for name, r in results.items():
        if name.startswith("toolbelt"):
            print(
                f"\n{name}: {r['sequential'] / base['sequential']:.2f}x the filesystem server "
                f"(1 in flight), {r['concurrent'] / base['concurrent']:.2f}x ({CONCURRENCY} in flight)"
            )


if __name__ == "__main__":
    anyio.run(main)
