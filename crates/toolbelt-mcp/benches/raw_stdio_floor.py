"""The floor of a stdio MCP server: `tools/call` of `echo` with no client library at all.

Usage:
  python3 raw_stdio_floor.py N C [--progress-token] COMMAND [ARGS...]

Starts the server, initializes by hand, then keeps C requests in flight (written as soon as an
answer frees a slot) until N answers came back. Prints calls per second and the server's CPU
time per call (user and system, from the server's resource usage once it exited, startup
included and shown apart). The client side here is a blocking loop with no SDK, so what is left
is the server's own cost; an SDK client cannot beat it. `--progress-token` puts
`_meta.progressToken` on every request as rmcp does, to compare the server's cost with and
without it.
"""

import json
import resource
import subprocess
import sys
import time


def rusage_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(calls: int, in_flight: int, progress_token: bool, command: list[str]) -> dict:
    server = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )

    def send(message: dict) -> None:
        server.stdin.write((json.dumps(message) + "\n").encode())
        server.stdin.flush()

    def receive() -> dict:
        """The next answer; notifications the server sends on its own are skipped."""
        while True:
            line = server.stdout.readline()
            if not line:
                raise SystemExit("the server closed its stdout")
            message = json.loads(line)
            if "id" in message:
                return message

    send({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw-floor", "version": "1"},
        },
    })
    receive()
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def request(i: int) -> dict:
        params = {"name": "echo", "arguments": {"message": f"call {i}"}}
        if progress_token:
            params["_meta"] = {"progressToken": i}
        return {"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": params}

    started = time.perf_counter()
    sent = answered = 0
    while sent < min(in_flight, calls):
        send(request(sent))
        sent += 1
    while answered < calls:
        answer = receive()
        if "result" not in answer or answer["result"].get("isError"):
            raise SystemExit(f"a call failed: {answer}")
        answered += 1
        if sent < calls:
            send(request(sent))
            sent += 1
    wall = time.perf_counter() - started
    server.stdin.close()
    server.wait()
    return {"calls_per_sec": calls / wall, "server_cpu_s": rusage_children()}


def main() -> None:
    args = sys.argv[1:]
    calls, in_flight = int(args[0]), int(args[1])
    progress_token = args[2] == "--progress-token"
    command = args[3:] if progress_token else args[2:]
    # The same server with no calls: its startup and shutdown cost, taken out of the figure.
    startup = run(0, 1, False, command)["server_cpu_s"]
    stats = run(calls, in_flight, progress_token, command)
    per_call = (stats["server_cpu_s"] - 2 * startup) / calls
    print(json.dumps({
        "calls": calls,
        "in_flight": in_flight,
        "progress_token": progress_token,
        "calls_per_sec": round(stats["calls_per_sec"]),
        "server_startup_cpu_ms": round(startup * 1e3, 1),
        "server_cpu_us_per_call": round(per_call * 1e6),
    }))


if __name__ == "__main__":
    main()
