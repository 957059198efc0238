// An independent MCP client (the TypeScript SDK, `@modelcontextprotocol/sdk` from npm) driving
// `toolbelt serve`.
//
// Usage:
//   node ts_client.cjs PEERS_DIR stdio COMMAND [ARGS...]
//   node ts_client.cjs PEERS_DIR http URL
//
// PEERS_DIR is tests/peers (where npm installed the SDK). TOOLBELT_TEST_TOKEN adds a bearer
// token over HTTP; TOOLBELT_TEST_DIR is the served directory, where the long Bash call writes
// its process ids. Prints one JSON object: the tool names, the results of Read, Grep and an
// aggregated server's `echo`, and the process ids of a Bash call it cancelled with an
// AbortSignal (which makes the SDK send notifications/cancelled).

const fs = require("node:fs");
const path = require("node:path");
const { createRequire } = require("node:module");

const [peersDir, transportKind, ...target] = process.argv.slice(2);
const sdk = createRequire(path.join(peersDir, "package.json"));
const { Client } = sdk("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = sdk("@modelcontextprotocol/sdk/client/stdio.js");
const { StreamableHTTPClientTransport } = sdk("@modelcontextprotocol/sdk/client/streamableHttp.js");

function transport() {
  if (transportKind === "stdio") {
    return new StdioClientTransport({
      command: target[0],
      args: target.slice(1),
      env: process.env,
      stderr: "inherit",
    });
  }
  const headers = {};
  if (process.env.TOOLBELT_TEST_TOKEN) {
    headers.Authorization = `Bearer ${process.env.TOOLBELT_TEST_TOKEN}`;
  }
  return new StreamableHTTPClientTransport(new URL(target[0]), { requestInit: { headers } });
}

function describe(result) {
  return {
    is_error: Boolean(result.isError),
    text: result.content.filter((c) => c.type === "text").map((c) => c.text).join(""),
    structured: result.structuredContent ?? null,
  };
}

async function waitForFile(file) {
  for (let i = 0; i < 600; i++) {
    if (fs.existsSync(file)) {
      const text = fs.readFileSync(file, "utf8").trim();
      if (text) return Number(text);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`${file} never appeared`);
}

// Serve connects its aggregated servers in the background: wait (reading the status
// resource) until each has connected or failed once, so their tools are listed.
async function waitForUpstreams(client) {
  for (let i = 0; i < 600; i++) {
    const read = await client.readResource({ uri: "toolbelt://status" });
    const servers = JSON.parse(read.contents[0].text).servers;
    if (servers.every((s) => s.state !== "connecting" || (s.attempt ?? 1) > 1)) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error("the aggregated servers never came up");
}

async function main() {
  const client = new Client({ name: "toolbelt-ts-test", version: "1.0.0" });
  await client.connect(transport());
  await waitForUpstreams(client);
  const listed = await client.listTools();
  const report = {
    tools: listed.tools.map((t) => t.name).sort(),
    read: describe(await client.callTool({ name: "Read", arguments: { file_path: "hello.txt" } })),
    grep: describe(
      await client.callTool({ name: "Grep", arguments: { pattern: "needle", output_mode: "content" } }),
    ),
    echo: describe(await client.callTool({ name: "echo", arguments: { message: "from node" } })),
  };

  const dir = process.env.TOOLBELT_TEST_DIR;
  const abort = new AbortController();
  const call = client
    .callTool(
      { name: "Bash", arguments: { command: "sleep 300 & echo $! > ts_sleep.pid; echo $$ > ts_shell.pid; wait" } },
      undefined,
      { signal: abort.signal, timeout: 600000 },
    )
    .then(() => "finished", (err) => `rejected: ${err.message}`);
  report.sleep_pid = await waitForFile(path.join(dir, "ts_sleep.pid"));
  report.shell_pid = await waitForFile(path.join(dir, "ts_shell.pid"));
  abort.abort("the test cancelled it");
  report.cancelled_call = await call;
  // The session still works after a cancellation.
  report.read_after_cancel = describe(
    await client.callTool({ name: "Read", arguments: { file_path: "hello.txt" } }),
  );
  await client.close();
  process.stdout.write(JSON.stringify(report) + "\n");
}

main().catch((err) => {
  process.stderr.write(`ts_client: ${err.stack || err}\n`);
  process.exit(1);
});
