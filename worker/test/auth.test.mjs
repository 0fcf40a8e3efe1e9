// Authentication: static client tokens and short-lived HMAC tokens (token.ts, and the
// issue-token script the site runs), the throttle on failed authentications per address
// (auththrottle.ts), and the deployments that must refuse everyone: no credentials, no
// upstream, a static token or signing key too short to be safe.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createHmac } from "node:crypto";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { DIST, get, post, startOpenAiUpstream, startWorkers, waitFor } from "../testing/harness.mjs";

const { issueToken, verifyToken } = await import(path.join(DIST, "token.js"));
const script = fileURLToPath(new URL("../scripts/issue-token.mjs", import.meta.url));

const SIGNING_KEY = "test-signing-key-0123456789abcdef";
const STATIC = "static-token-alice-0123456789abcdef";
/** Exactly the 32 characters a static token must have at least. */
const BOB = "static-token-bob-".padEnd(32, "0");
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
      CLIENT_TOKENS: ` alice=${STATIC} , bob=${BOB},broken-entry,=nameless`,
      TOKEN_SIGNING_KEY: SIGNING_KEY,
      TOKEN_MAX_TTL_SECONDS: "600",
      ALLOWED_MODELS: "test-model",
      // These tests send many wrong tokens from one address on purpose.
      AUTH_FAILURES_PER_MINUTE: "100000",
    },
    closed: { UPSTREAM_URL: upstream.url, ALLOWED_MODELS: "*" },
    misconfigured: { CLIENT_TOKENS: `alice=${STATIC}`, ALLOWED_MODELS: "*", UPSTREAM_URL: "not a url" },
    throttled: {
      UPSTREAM_URL: upstream.url,
      CLIENT_TOKENS: `alice=${STATIC}`,
      TOKEN_SIGNING_KEY: SIGNING_KEY,
      ALLOWED_MODELS: "test-model",
      AUTH_FAILURES_PER_MINUTE: "3",
    },
    shortToken: { UPSTREAM_URL: upstream.url, CLIENT_TOKENS: `alice=${STATIC},me=dev-token`, ALLOWED_MODELS: "*" },
    shortKey: {
      UPSTREAM_URL: upstream.url,
      CLIENT_TOKENS: `alice=${STATIC}`,
      TOKEN_SIGNING_KEY: "k".repeat(31),
      ALLOWED_MODELS: "*",
    },
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
  await expect401(`${STATIC.slice(0, -1)}g`);
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
  const viaBob = await get(workers.urls.main, "/v1/models", { token: BOB });
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

test("a static token or TOKEN_SIGNING_KEY under 32 characters makes every request 500, naming it but not the secret", async () => {
  for (const [worker, message] of [
    ["shortToken", "CLIENT_TOKENS: the token for 'me' is 9 characters; tokens must be at least 32"],
    ["shortKey", "TOKEN_SIGNING_KEY is 31 characters; it must be at least 32"],
  ]) {
    for (const [method, route] of [
      ["POST", "/v1/chat/completions"],
      ["GET", "/v1/models"],
      ["GET", "/elsewhere"],
    ]) {
      const before = upstream.requests.length;
      // The other, long enough, token is refused too: the deployment is misconfigured as a whole.
      const response = await fetch(new URL(route, workers.urls[worker]), {
        method,
        headers: { Authorization: `Bearer ${STATIC}` },
        body: method === "POST" ? JSON.stringify(CHAT) : undefined,
      });
      const text = await response.text();
      assert.equal(response.status, 500, `${worker} ${route}: ${text}`);
      const { error } = JSON.parse(text);
      assert.equal(error.code, "misconfigured");
      assert.equal(error.message, message);
      assert.ok(!text.includes("dev-token") && !text.includes("kkkk"), text);
      assert.equal(upstream.requests.length, before, "a misconfigured worker reached the upstream");
    }
  }
  // The secrets appear nowhere in the worker's output either.
  assert.ok(!workers.output().includes("dev-token"));
  assert.ok(!workers.output().includes("k".repeat(31)));
});

describe("failed authentications are throttled per address (AUTH_FAILURES_PER_MINUTE = 3)", () => {
  const from = (address, token, route = "/v1/chat/completions") => {
    const headers = address === null ? {} : { "CF-Connecting-IP": address };
    return route === "/v1/models"
      ? get(workers.urls.throttled, route, { token, headers })
      : post(workers.urls.throttled, route, CHAT, { token, headers });
  };
  const wrong = `${STATIC}x`;

  test("after 3 failures an address gets 429 with Retry-After, even with the correct token; successes do not count", async () => {
    const address = "203.0.113.7";
    assert.equal((await from(address, STATIC)).status, 200);
    assert.equal((await from(address, wrong)).status, 401);
    assert.equal((await from(address, undefined)).status, 401);
    for (let i = 0; i < 4; i++) assert.equal((await from(address, STATIC)).status, 200, "a success was counted");
    assert.equal((await from(address, wrong)).status, 401);

    const before = upstream.requests.length;
    for (const [token, route] of [
      [wrong, "/v1/chat/completions"],
      [STATIC, "/v1/chat/completions"],
      [STATIC, "/v1/models"],
    ]) {
      const response = await from(address, token, route);
      assert.equal(response.status, 429, `${route}: ${response.text}`);
      assert.equal(response.json.error.code, "rate_limited");
      assert.match(response.json.error.message, /failed authentications/);
      const retryAfter = Number(response.headers.get("retry-after"));
      assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60, `Retry-After: ${retryAfter}`);
    }
    assert.equal(upstream.requests.length, before, "a throttled request reached the upstream");

    // Another address is not affected.
    assert.equal((await from("203.0.113.8", STATIC)).status, 200);
    assert.equal((await from("203.0.113.8", wrong)).status, 401);
    assert.equal((await from("203.0.113.8", STATIC)).status, 200);
  });

  test("an expired HMAC token is not counted as a failure", async () => {
    const expired = await issueToken(SIGNING_KEY, "site-user", 60, now() - 120);
    for (let i = 0; i < 5; i++) {
      const response = await from("203.0.113.9", expired);
      assert.equal(response.status, 401);
      assert.equal(response.json.error.code, "token_expired");
    }
    assert.equal((await from("203.0.113.9", STATIC)).status, 200);
  });

  test("requests without CF-Connecting-IP share one key", async () => {
    for (let i = 0; i < 3; i++) assert.equal((await from(null, wrong)).status, 401);
    assert.equal((await from(null, STATIC)).status, 429);
    assert.equal((await from("203.0.113.10", STATIC)).status, 200, "an address was throttled with the unknown ones");
  });

  test("concurrent guesses get no more tries than sequential ones", async () => {
    const statuses = await Promise.all(Array.from({ length: 12 }, () => from("203.0.113.11", wrong)));
    const counts = statuses.reduce((n, r) => ({ ...n, [r.status]: (n[r.status] ?? 0) + 1 }), {});
    assert.deepEqual(counts, { 401: 3, 429: 9 });
    // Concurrent good tokens from a fresh address are delayed by each other at most, never refused.
    const good = await Promise.all(Array.from({ length: 12 }, () => from("203.0.113.12", STATIC, "/v1/models")));
    assert.deepEqual(
      good.map((r) => r.status),
      Array(12).fill(200),
    );
  });
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
