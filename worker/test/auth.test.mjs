// Authentication: static client tokens and short-lived HMAC tokens (token.ts, and the
// issue-token script the site runs), and the deployments that must refuse everyone.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createHmac } from "node:crypto";
import path from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { DIST, get, post, startOpenAiUpstream, startWorkers, waitFor } from "../testing/harness.mjs";

const { issueToken, verifyToken } = await import(path.join(DIST, "token.js"));
const script = fileURLToPath(new URL("../scripts/issue-token.mjs", import.meta.url));

const SIGNING_KEY = "test-signing-key-0123456789abcdef";
const STATIC = "static-token-alice";
const CHAT = { model: "test-model", messages: [{ role: "user", content: "hello" }] };
const now = () => Math.floor(Date.now() / 1000);
const YEAR = 365 * 24 * 3600;

/** Signs any payload the way a site would, to build tokens issueToken refuses to make. */
function signed(payload, key = SIGNING_KEY) {
  return `${payload}.${createHmac("sha256", key).update(payload).digest("base64url")}`;
}

let upstream;
let workers;

before(async () => {
  upstream = await startOpenAiUpstream();
  workers = await startWorkers({
    main: {
      UPSTREAM_URL: upstream.url,
      CLIENT_TOKENS: ` alice=${STATIC} , bob=static-token-bob,broken-entry,=nameless`,
      TOKEN_SIGNING_KEY: SIGNING_KEY,
      TOKEN_MAX_TTL_SECONDS: "600",
      ALLOWED_MODELS: "test-model",
    },
    closed: { UPSTREAM_URL: upstream.url, ALLOWED_MODELS: "*" },
    misconfigured: { CLIENT_TOKENS: `alice=${STATIC}`, ALLOWED_MODELS: "*", UPSTREAM_URL: "not a url" },
  });
});

after(async () => {
  await workers?.dispose();
  await upstream?.close();
});

async function expect401(token, code = "unauthorized") {
  const before = upstream.requests.length;
  const response = await post(workers.urls.main, "/v1/chat/completions", CHAT, { token });
  assert.equal(response.status, 401, response.text);
  assert.equal(response.json.error.code, code);
  assert.equal(response.json.error.type, "docmem_worker");
  assert.equal(response.headers.get("content-type"), "application/json");
  assert.match(response.headers.get("www-authenticate"), /^Bearer/);
  assert.equal(upstream.requests.length, before, "an unauthenticated request reached the upstream");
}

test("no token, a wrong token, or a non-Bearer header → 401", async () => {
  await expect401(undefined);
  await expect401("static-token-alicf");
  await expect401("");
  const basic = await post(workers.urls.main, "/v1/chat/completions", CHAT, {
    headers: { Authorization: `Basic ${STATIC}` },
  });
  assert.equal(basic.status, 401);
});

test("expired, too-long-lived, forged and malformed HMAC tokens → 401", async () => {
  await expect401(await issueToken(SIGNING_KEY, "site-user", 60, now() - 120), "token_expired");
  await expect401(await issueToken(SIGNING_KEY, "site-user", 3600));
  await expect401(await issueToken("another-key", "site-user", 60));
  const good = await issueToken(SIGNING_KEY, "site-user", 60);
  const [prefix, , issued, expiry, signature] = good.split(".");
  await expect401(`${prefix}.mallory.${issued}.${expiry}.${signature}`);
  await expect401(`${prefix}.site-user.${issued}.${Number(expiry) + 1}.${signature}`);
  await expect401(`${prefix}.site-user.${Number(issued) - 1}.${expiry}.${signature}`);
  await expect401(`${good}x`);
  await expect401(`dm1.site-user.${issued}.${expiry}`);
  // The old four-part form (no issue time), even correctly signed.
  await expect401(signed(`dm1.site-user.${expiry}`));
});

test("a token's lifetime counts from its signed issue time, not from now", async () => {
  // Signed to live a year (the cap is 600 s), 30 s before its expiry: it never becomes valid.
  await expect401(await issueToken(SIGNING_KEY, "site-user", YEAR, now() - YEAR + 30));
  // An issue time in the future (past the 60 s clock skew), near or far: it is refused too,
  // or a token dated ahead would be usable from now until long after the cap.
  await expect401(await issueToken(SIGNING_KEY, "site-user", 300, now() + 120));
  await expect401(await issueToken(SIGNING_KEY, "site-user", 300, now() + YEAR));
  // Within the clock skew it is accepted.
  const skewed = await post(workers.urls.main, "/v1/chat/completions", CHAT, {
    token: await issueToken(SIGNING_KEY, "site-user", 300, now() + 30),
  });
  assert.equal(skewed.status, 200, skewed.text);
});

test("a static token and a valid HMAC token are accepted, as their client", async () => {
  const viaStatic = await post(workers.urls.main, "/v1/chat/completions", CHAT, { token: STATIC });
  assert.equal(viaStatic.status, 200, viaStatic.text);
  const viaBob = await get(workers.urls.main, "/v1/models", { token: "static-token-bob" });
  assert.equal(viaBob.status, 200, viaBob.text);
  const hmac = await issueToken(SIGNING_KEY, "site-user", 300);
  const viaHmac = await post(workers.urls.main, "/v1/chat/completions", CHAT, { token: hmac });
  assert.equal(viaHmac.status, 200, viaHmac.text);
  assert.equal(viaHmac.json.choices[0].message.content, "an answer");

  const clients = () => workers.logLines().map((line) => line.client);
  const all = () => ["alice", "bob", "site-user"].every((client) => clients().includes(client));
  assert.ok(await waitFor(all, 3000), clients().join());
});

test("the issue-token script's token is accepted", async () => {
  const { stdout } = await promisify(execFile)(process.execPath, [script, "--client", "web_42", "--ttl", "120"], {
    env: { ...process.env, TOKEN_SIGNING_KEY: SIGNING_KEY },
  });
  const token = stdout.trim();
  assert.match(token, /^dm1\.web_42\.\d+\.\d+\.[A-Za-z0-9_-]{43}$/);
  const [, , issued, expiry] = token.split(".");
  assert.equal(Number(expiry) - Number(issued), 120);
  assert.ok(Math.abs(Number(issued) - now()) <= 5, `issued at ${issued}, now is ${now()}`);
  const response = await post(workers.urls.main, "/v1/chat/completions", CHAT, { token });
  assert.equal(response.status, 200, response.text);
  await assert.rejects(
    promisify(execFile)(process.execPath, [script, "--client", "web_42"], {
      env: { ...process.env, TOKEN_SIGNING_KEY: "" },
    }),
    /TOKEN_SIGNING_KEY is not set/,
  );
});

test("with no CLIENT_TOKENS and no TOKEN_SIGNING_KEY every request is refused", async () => {
  for (const token of [undefined, STATIC, await issueToken(SIGNING_KEY, "site-user", 60)]) {
    const response = await post(workers.urls.closed, "/v1/chat/completions", CHAT, { token });
    assert.equal(response.status, 401);
    assert.equal(response.json.error.code, "unauthorized");
  }
});

test("without a usable UPSTREAM_URL every request is 500 misconfigured", async () => {
  for (const [method, route] of [
    ["POST", "/v1/chat/completions"],
    ["GET", "/v1/models"],
    ["GET", "/elsewhere"],
  ]) {
    const response = await fetch(new URL(route, workers.urls.misconfigured), {
      method,
      headers: { Authorization: `Bearer ${STATIC}` },
      body: method === "POST" ? JSON.stringify(CHAT) : undefined,
    });
    assert.equal(response.status, 500);
    assert.equal((await response.json()).error.code, "misconfigured");
  }
});

test("token.ts: issue and verify round trip; each failure has its reason", async () => {
  const t = 1_800_000_000;
  const token = await issueToken(SIGNING_KEY, "client_1", 300, t);
  assert.match(token, new RegExp(`^dm1\\.client_1\\.${t}\\.${t + 300}\\.[A-Za-z0-9_-]{43}$`));
  assert.deepEqual(await verifyToken(SIGNING_KEY, token, 600, t + 10), {
    ok: true,
    client: "client_1",
    issued: t,
    expires: t + 300,
  });
  assert.equal((await verifyToken(SIGNING_KEY, token, 600, t + 299)).ok, true);
  assert.deepEqual(await verifyToken(SIGNING_KEY, token, 600, t + 300), { ok: false, reason: "expired" });
  assert.deepEqual(await verifyToken(SIGNING_KEY, token, 200, t), { ok: false, reason: "ttl_too_long" });
  assert.deepEqual(await verifyToken("other", token, 600, t), { ok: false, reason: "bad_signature" });

  // A one-year token stays refused to its last second: its lifetime, not its time left, is judged.
  const yearLong = await issueToken(SIGNING_KEY, "client_1", YEAR, t);
  assert.deepEqual(await verifyToken(SIGNING_KEY, yearLong, 600, t + YEAR - 1), { ok: false, reason: "ttl_too_long" });
  assert.deepEqual(await verifyToken(SIGNING_KEY, yearLong, 600, t), { ok: false, reason: "ttl_too_long" });

  // An issue time ahead of the worker's clock: 60 s of skew is tolerated, more is not.
  const ahead = await issueToken(SIGNING_KEY, "client_1", 300, t + 60);
  assert.equal((await verifyToken(SIGNING_KEY, ahead, 600, t)).ok, true);
  const further = await issueToken(SIGNING_KEY, "client_1", 300, t + 61);
  assert.deepEqual(await verifyToken(SIGNING_KEY, further, 600, t), { ok: false, reason: "not_yet_valid" });
  const farAhead = await issueToken(SIGNING_KEY, "client_1", 300, t + YEAR);
  assert.deepEqual(await verifyToken(SIGNING_KEY, farAhead, 600, t), { ok: false, reason: "not_yet_valid" });

  for (const bad of [
    "",
    "dm1",
    "dm2.client_1.1.2.AAAA",
    `${token}.extra`,
    token.replace("client_1", "client.1"),
    signed(`dm1.client_1.${t + 300}`), // the old four-part form
    signed(`dm1.client_1.${t}.${t}`), // expires when issued
    signed(`dm1.client_1.${t + 10}.${t}`), // expires before it is issued
    signed(`dm1.client_1.0${t}.${t + 300}`), // a non-canonical number
    signed(`dm1.client_1.${t}.+${t + 300}`),
  ]) {
    assert.deepEqual(await verifyToken(SIGNING_KEY, bad, 600, t), { ok: false, reason: "malformed" }, bad);
  }
  await assert.rejects(issueToken(SIGNING_KEY, "has space", 60), /client name/);
  await assert.rejects(issueToken(SIGNING_KEY, "x".repeat(65), 60), /client name/);
  await assert.rejects(issueToken("", "ok", 60), /empty/);
  await assert.rejects(issueToken(SIGNING_KEY, "ok", 0), /TTL/);
});
