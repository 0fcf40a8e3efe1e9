#!/usr/bin/env node
// Issues a short-lived docmem worker token for a browser client, as the site's server side
// would: `node worker/scripts/issue-token.mjs --client <name> [--ttl <seconds>]`, with the
// signing key in the TOKEN_SIGNING_KEY environment variable (never on the command line, where
// other users could read it). Prints the token on stdout.
//
// It uses the worker's own token module (worker/dist/token.js, built by `npx tsc -p worker`),
// so the format cannot drift from what the worker checks. A site written in another language
// makes the same token: "dm1.<client>.<iat>.<exp>." (issued-at and expiry, Unix seconds, with
// exp - iat at most the worker's TOKEN_MAX_TTL_SECONDS) followed by the unpadded base64url
// HMAC-SHA256 of that prefix without its final dot, keyed by the UTF-8 bytes of the key.
import { parseArgs } from "node:util";

const usage =
  "usage: TOKEN_SIGNING_KEY=... node worker/scripts/issue-token.mjs --client <name> [--ttl <seconds, default 3600>]";

let values;
try {
  ({ values } = parseArgs({
    options: { client: { type: "string" }, ttl: { type: "string", default: "3600" }, help: { type: "boolean" } },
  }));
} catch (error) {
  console.error(`${error.message}\n${usage}`);
  process.exit(2);
}
if (values.help) {
  console.log(usage);
  process.exit(0);
}
const key = process.env.TOKEN_SIGNING_KEY ?? "";
if (key === "") {
  console.error(`TOKEN_SIGNING_KEY is not set\n${usage}`);
  process.exit(2);
}
if (values.client === undefined) {
  console.error(`--client is required\n${usage}`);
  process.exit(2);
}
if (!/^\d+$/.test(values.ttl)) {
  console.error(`--ttl must be a whole number of seconds\n${usage}`);
  process.exit(2);
}

let issueToken;
try {
  ({ issueToken } = await import(new URL("../dist/token.js", import.meta.url)));
} catch {
  console.error("worker/dist/token.js is missing: compile the worker first (npx tsc -p worker)");
  process.exit(1);
}
try {
  console.log(await issueToken(key, values.client, Number(values.ttl)));
} catch (error) {
  console.error(error.message);
  process.exit(2);
}
