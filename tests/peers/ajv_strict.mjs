// Compiles tool schemas with Ajv in strict mode (JSON Schema 2020-12, standard formats only)
// and validates an example call against each input schema.
//
// stdin: {"tools": [declaration, ...], "examples": {"<tool name>": {arguments}, ...}}, where a
// declaration is what `toolbelt tools list --json` prints (name, input_schema, output_schema).
// stdout: one line per tool ("ok <name>" or "FAIL <name>: <why>"); exit code 1 if any failed,
// 2 on unusable input. A tool without an example fails: every schema must be shown to accept
// a real call, not only to compile.
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
let input;
try {
  input = JSON.parse(Buffer.concat(chunks).toString("utf8"));
} catch (err) {
  console.error(`ajv_strict: stdin is not JSON: ${err.message}`);
  process.exit(2);
}
if (!Array.isArray(input.tools) || typeof input.examples !== "object") {
  console.error('ajv_strict: expected {"tools": [...], "examples": {...}}');
  process.exit(2);
}

// The formats JSON Schema 2020-12 defines. ajv-formats also knows OpenAPI's (int64, double,
// ...), which other validators do not: only the standard ones are registered, so a schema
// using any other format fails to compile, as it would for a client without ajv-formats.
const CHECKED_FORMATS = [
  "date-time", "date", "time", "duration", "email", "hostname", "ipv4", "ipv6", "uri",
  "uri-reference", "uuid", "uri-template", "json-pointer", "relative-json-pointer", "regex",
];
const ANNOTATION_FORMATS = ["idn-email", "idn-hostname", "iri", "iri-reference"];

function strictAjv() {
  // A fresh instance per schema: one bad schema cannot leave state behind for the next.
  const ajv = new Ajv2020({ strict: true, allErrors: true });
  addFormats(ajv, CHECKED_FORMATS);
  for (const name of ANNOTATION_FORMATS) ajv.addFormat(name, true);
  return ajv;
}

function compile(schema) {
  try {
    return { validate: strictAjv().compile(schema) };
  } catch (err) {
    return { error: err.message };
  }
}

let failed = 0;
for (const tool of input.tools) {
  const problems = [];
  const input_schema = compile(tool.input_schema);
  if (input_schema.error) {
    problems.push(`input schema does not compile: ${input_schema.error}`);
  } else if (!(tool.name in input.examples)) {
    problems.push("no example call to validate");
  } else if (!input_schema.validate(input.examples[tool.name])) {
    problems.push(`example rejected: ${JSON.stringify(input_schema.validate.errors)}`);
  }
  if (tool.output_schema != null) {
    const output_schema = compile(tool.output_schema);
    if (output_schema.error) {
      problems.push(`output schema does not compile: ${output_schema.error}`);
    }
  }
  if (problems.length === 0) {
    console.log(`ok ${tool.name}`);
  } else {
    failed += 1;
    console.log(`FAIL ${tool.name}: ${problems.join("; ")}`);
  }
}
process.exit(failed === 0 ? 0 : 1);
