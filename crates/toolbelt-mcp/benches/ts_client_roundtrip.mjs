// The TypeScript SDK client's side of the MCP round-trip benchmark (`@modelcontextprotocol/sdk`
// from tests/peers, run by Node).
//
// Usage:
//   node ts_client_roundtrip.mjs stdio N C COMMAND [ARGS...]   spawn a stdio server and call it
//   node ts_client_roundtrip.mjs http N C URL                  call a streamable HTTP server
//
// Calls the server's `echo` tool N times over one session (after a short warm-up), with C calls
// in flight at a time (C=1: one after another), and prints one JSON line:
// {"calls", "calls_per_sec", "p50_us", "p99_us", "cpu_us_per_call"}, as py_client_roundtrip.py
// does (the client process's own CPU time, user and system, over the measured calls). The Rust
// bench (`mcp_roundtrip.rs`) runs it against the same server in the same run.

import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import path from "node:path";

const WARMUP = 50;

const peers = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../tests/peers");
const sdk = createRequire(path.join(peers, "package.json"));
const { Client } = sdk("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = sdk("@modelcontextprotocol/sdk/client/stdio.js");
const { StreamableHTTPClientTransport } = sdk("@modelcontextprotocol/sdk/client/streamableHttp.js");

const [mode, callsArg, concurrencyArg, ...target] = process.argv.slice(2);
const calls = Number(callsArg);
const concurrency = Number(concurrencyArg);

function transport() {
  if (mode === "stdio") {
    return new StdioClientTransport({ command: target[0], args: target.slice(1), stderr: "ignore" });
  }
  if (mode === "http") {
    return new StreamableHTTPClientTransport(new URL(target[0]));
  }
  throw new Error(`unknown mode ${mode}; use stdio or http`);
}

const client = new Client({ name: "toolbelt-bench-ts", version: "1.0.0" });
await client.connect(transport());
for (let i = 0; i < WARMUP; i++) {
  await client.callTool({ name: "echo", arguments: { message: `warm ${i}` } });
}

const latencies = [];
async function worker(first) {
  for (let i = first; i < calls; i += concurrency) {
    const t0 = process.hrtime.bigint();
    const result = await client.callTool({ name: "echo", arguments: { message: `call ${i}` } });
    latencies.push(Number(process.hrtime.bigint() - t0) / 1000);
    if (result.isError) {
      throw new Error(`call ${i} failed: ${JSON.stringify(result)}`);
    }
  }
}

const started = process.hrtime.bigint();
const cpuStarted = process.cpuUsage();
await Promise.all(Array.from({ length: concurrency }, (_, w) => worker(w)));
const totalSeconds = Number(process.hrtime.bigint() - started) / 1e9;
const cpu = process.cpuUsage(cpuStarted);
latencies.sort((a, b) => a - b);
const at = (p) => latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * p))];
console.log(
  JSON.stringify({
    calls,
    calls_per_sec: calls / totalSeconds,
    p50_us: at(0.5),
    p99_us: at(0.99),
    cpu_us_per_call: (cpu.user + cpu.system) / calls,
  }),
);
await client.close();
