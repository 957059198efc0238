#!/usr/bin/env python3
"""Per-turn wall time of the OpenAI Agents SDK (`openai-agents`) against toolbelt's scripted
OpenAI-compatible server, for a side-by-side comparison with toolbelt-agent's `turn` bench.

One run is what the Rust bench calls "run with one tool round": `Runner.run` of an agent with
one function tool `multiply`; the server answers the first model call with a call to
`multiply({"a": 25, "b": 4})` and the second, which carries the tool's result, with text.
"Model call only" is one raw `chat.completions.create` with the same client: the floor, so
`run - 2 x call` is the framework's own cost for the turn. Tracing is disabled.

Usage (the server binary is built and started unless --base-url is given):

    pip install openai-agents
    python3 crates/toolbelt-model/benches/openai_agents_turn.py --runs 500 [--stream]
    python3 crates/toolbelt-model/benches/openai_agents_turn.py --base-url http://127.0.0.1:PORT/v1
"""

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time

from agents import (
    Agent,
    ModelSettings,
    OpenAIChatCompletionsModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

WORKSPACE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


@function_tool
def multiply(a: int, b: int) -> int:
    """Multiplies two integers."""
    return a * b


def start_server():
    """Builds and starts the scripted server example; returns (process, base URL)."""
    target = os.environ.get("CARGO_TARGET_DIR", "/work/target/bench")
    build = [
        "cargo", "build", "--release", "-q", "-p", "toolbelt-model",
        "--features", "test-server", "--example", "scripted_server",
    ]
    subprocess.run(build, cwd=WORKSPACE, check=True, env={**os.environ, "CARGO_TARGET_DIR": target})
    binary = os.path.join(target, "release", "examples", "scripted_server")
    process = subprocess.Popen([binary, "--port", "0"], stdout=subprocess.PIPE, text=True)
    base_url = process.stdout.readline().strip()
    if not base_url.startswith("http://"):
        process.kill()
        sys.exit(f"the scripted server did not print its base URL (got {base_url!r})")
    return process, base_url


async def one_run(agent, stream):
    prompt = "What is 25 times 4?"
    if stream:
        result = Runner.run_streamed(agent, prompt)
        async for _ in result.stream_events():
            pass
    else:
        result = await Runner.run(agent, prompt)
    if "100" not in str(result.final_output):
        raise RuntimeError(f"unexpected answer: {result.final_output!r}")


async def one_call(client, stream):
    messages = [{"role": "user", "content": "What is 25 times 4?"}]
    if stream:
        chunks = await client.chat.completions.create(model="bench", messages=messages, stream=True)
        async for _ in chunks:
            pass
    else:
        await client.chat.completions.create(model="bench", messages=messages)


async def timed(label, runs, warmup, step):
    for _ in range(warmup):
        await step()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        await step()
        times.append(time.perf_counter() - start)
    mean, median = statistics.fmean(times), statistics.median(times)
    print(f"{label:<38} mean {mean * 1e6:9.0f} us   median {median * 1e6:9.0f} us   ({runs} runs)")
    return median


async def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base-url", help="a running scripted server (else one is started)")
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--stream", action="store_true", help="stream model answers (SSE)")
    args = parser.parse_args()

    server = None
    base_url = args.base_url
    if base_url is None:
        server, base_url = start_server()
    try:
        set_tracing_disabled(True)
        client = AsyncOpenAI(base_url=base_url, api_key="not-needed")
        agent = Agent(
            name="bench",
            instructions="You multiply numbers with the multiply tool.",
            model=OpenAIChatCompletionsModel(model="bench", openai_client=client),
            model_settings=ModelSettings(),
            tools=[multiply],
        )
        mode = "streaming" if args.stream else "non-streaming"
        print(f"openai-agents against {base_url}, {mode}")
        call = await timed("model call only (the floor)", args.runs, args.warmup,
                           lambda: one_call(client, args.stream))
        run = await timed("run with one tool round (2 calls)", args.runs, args.warmup,
                          lambda: one_run(agent, args.stream))
        print(f"{'framework overhead per turn':<38} median {(run - 2 * call) * 1e6:9.0f} us"
              "   (run - 2 x model call)")
    finally:
        if server is not None:
            server.kill()
            server.wait()


if __name__ == "__main__":
    asyncio.run(main())
