"""The floor of a streamable HTTP MCP server: `tools/call` of `echo` in a bare httpx loop.

Usage: python3 raw_http_floor.py URL [N]

No MCP SDK on the client side: one POST per call on a kept-alive connection, the reply read
whole. What remains is (nearly) the server's own time per call, to read the client rows of
`mcp_roundtrip.rs` against. Prints the median latency and calls per second.
"""

import sys
import time

import httpx

url = sys.argv[1]
calls = int(sys.argv[2]) if len(sys.argv) > 2 else 300
headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
with httpx.Client(timeout=30) as client:
    reply = client.post(url, headers=headers, json={
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-03-26", "capabilities": {},
                   "clientInfo": {"name": "floor", "version": "1"}},
    })
    headers["mcp-session-id"] = reply.headers["mcp-session-id"]
    headers["mcp-protocol-version"] = "2025-03-26"
    client.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    latencies = []
    for i in range(calls):
        started = time.perf_counter()
        reply = client.post(url, headers=headers, json={
            "jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"message": f"call {i}"}},
        })
        reply.read()
        latencies.append(time.perf_counter() - started)
    latencies.sort()
    print(f"p50 {latencies[len(latencies) // 2] * 1e6:.0f} us, {calls / sum(latencies):.0f} calls/s")
