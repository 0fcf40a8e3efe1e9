// The request path apart from streaming and auth: CORS, body and cost limits, what reaches
// the upstream, rate limits, upstream failures, pass-through of logprobs, embeddings, models.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  get,
  LOGPROBS,
  post,
  startOpenAiUpstream,
  startUpstream,
  startWorkers,
  UPSTREAM_MODELS,
} from "../testing/harness.mjs";

const TOKEN = "app-token-9f8e7d6c5b4a3928171605f4e3d2c1b0";
const TOKEN_A = "token-a-0123456789abcdef0123456789";
const TOKEN_B = "token-b-0123456789abcdef0123456789";
const UPSTREAM_KEY = "upstream-secret-key-5c4b3a";
const APP = "https://app.example";
const CHAT = { model: "test-model", messages: [{ role: "user", content: "hello" }] };

let upstream;
let bare;
let down;
let workers;

before(async () => {
  upstream = await startOpenAiUpstream({ slowMs: 2000 });
  bare = await startOpenAiUpstream({ hasModels: false });
  const gone = await startUpstream(() => undefined);
  await gone.close();
  down = gone.url;
  const common = { CLIENT_TOKENS: `app=${TOKEN}`, UPSTREAM_KEY };
  workers = await startWorkers(
    {
      main: {
        ...common,
        UPSTREAM_URL: `${upstream.url}/`,
        ALLOWED_ORIGINS: `${APP}, http://localhost:8080`,
        ALLOWED_MODELS: "test-model, other-model, slow-headers, fail-500, reject-400, reject-400-long, reject-401",
        MAX_BODY_BYTES: 2048,
        MAX_TOKENS_CAP: "1000",
        MAX_CHOICES: "many",
        RATE_LIMIT_PER_MINUTE: "100000",
        UPSTREAM_TIMEOUT_MS: "1000",
      },
      limited: {
        UPSTREAM_URL: upstream.url,
        CLIENT_TOKENS: `a=${TOKEN_A},b=${TOKEN_B}`,
        ALLOWED_MODELS: "*",
        RATE_LIMIT_PER_MINUTE: "3",
      },
      bound: {
        UPSTREAM_URL: upstream.url,
        CLIENT_TOKENS: `a=${TOKEN_A}`,
        ALLOWED_MODELS: "*",
        RATE_LIMIT_PER_MINUTE: "1000",
      },
      down: { ...common, UPSTREAM_URL: down, ALLOWED_MODELS: "*" },
      bare: { ...common, UPSTREAM_URL: bare.url, ALLOWED_MODELS: "test-model,other-model" },
      any: { ...common, UPSTREAM_URL: upstream.url, ALLOWED_MODELS: "*" },
      none: { ...common, UPSTREAM_URL: upstream.url },
    },
    { bound: { ratelimits: { RATE_LIMITER: { simple: { limit: 2, period: 60 } } } } },
  );
});

after(async () => {
  await workers?.dispose();
  await upstream?.close();
  await bare?.close();
});

const main = () => workers.urls.main;

function assertError(response, status, code) {
  assert.equal(response.status, status, response.text);
  assert.equal(response.headers.get("content-type"), "application/json");
  assert.deepEqual(Object.keys(response.json.error).sort(), ["code", "message", "type"]);
  assert.equal(response.json.error.code, code, response.text);
  assert.equal(response.json.error.type, "docmem_worker");
  assert.ok(response.json.error.message.length > 0);
}

/** Runs `send` and asserts the upstream saw no request. */
async function notForwarded(send) {
  const count = upstream.requests.length;
  const response = await send();
  assert.equal(upstream.requests.length, count, "the request reached the upstream");
  return response;
}

describe("CORS", () => {
  test("a preflight from an allowed origin gets the allowed methods and headers, without a token", async () => {
    const response = await fetch(new URL("/v1/chat/completions", main()), {
      method: "OPTIONS",
      headers: {
        Origin: APP,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type",
      },
    });
    assert.equal(response.status, 204);
    assert.equal(response.headers.get("access-control-allow-origin"), APP);
    assert.match(response.headers.get("vary"), /Origin/);
    assert.match(response.headers.get("access-control-allow-methods"), /\bPOST\b/);
    const allowHeaders = response.headers.get("access-control-allow-headers").toLowerCase();
    assert.ok(allowHeaders.includes("authorization") && allowHeaders.includes("content-type"), allowHeaders);
    assert.ok(Number(response.headers.get("access-control-max-age")) > 0);

    const models = await fetch(new URL("/v1/models", main()), {
      method: "OPTIONS",
      headers: { Origin: "http://localhost:8080" },
    });
    assert.equal(models.status, 204);
    assert.match(models.headers.get("access-control-allow-methods"), /\bGET\b/);
  });

  test("a disallowed origin is refused 403, preflight and request alike", async () => {
    const request = await notForwarded(() =>
      post(main(), "/v1/chat/completions", CHAT, { token: TOKEN, headers: { Origin: "https://evil.example" } }),
    );
    assertError(request, 403, "origin_not_allowed");
    assert.equal(request.headers.get("access-control-allow-origin"), null);

    const preflight = await fetch(new URL("/v1/chat/completions", main()), {
      method: "OPTIONS",
      headers: { Origin: "https://app.example.evil.test", "Access-Control-Request-Method": "POST" },
    });
    assert.equal(preflight.status, 403);
    assert.equal((await preflight.json()).error.code, "origin_not_allowed");
    assert.equal(preflight.headers.get("access-control-allow-origin"), null);
  });

  test("an allowed origin's answers carry Access-Control-Allow-Origin, errors included", async () => {
    const ok = await post(main(), "/v1/chat/completions", CHAT, { token: TOKEN, headers: { Origin: APP } });
    assert.equal(ok.status, 200);
    assert.equal(ok.headers.get("access-control-allow-origin"), APP);
    assert.equal(ok.headers.get("cross-origin-resource-policy"), "cross-origin");
    for (const [response, status] of [
      [await post(main(), "/v1/chat/completions", CHAT, { token: "wrong", headers: { Origin: APP } }), 401],
      [await get(main(), "/nowhere", { headers: { Origin: APP } }), 404],
      [await post(main(), "/v1/chat/completions", "{", { token: TOKEN, headers: { Origin: APP } }), 400],
    ]) {
      assert.equal(response.status, status);
      assert.equal(response.headers.get("access-control-allow-origin"), APP);
      assert.match(response.headers.get("vary"), /Origin/);
    }
  });

  test("a request without Origin (the CLI) is served and gets no CORS grant", async () => {
    const response = await post(main(), "/v1/chat/completions", CHAT, { token: TOKEN });
    assert.equal(response.status, 200);
    assert.equal(response.headers.get("access-control-allow-origin"), null);
  });
});

describe("limits", () => {
  test("a body over MAX_BODY_BYTES is refused 413, by Content-Length and while counting a chunked body", async () => {
    const big = JSON.stringify({ ...CHAT, messages: [{ role: "user", content: "x".repeat(4096) }] });
    assertError(
      await notForwarded(() => post(main(), "/v1/chat/completions", big, { token: TOKEN })),
      413,
      "body_too_large",
    );

    const chunked = await notForwarded(async () => {
      const encoder = new TextEncoder();
      let sent = 0;
      const body = new ReadableStream({
        pull(controller) {
          if (sent >= 8) return controller.close();
          controller.enqueue(encoder.encode(sent === 0 ? `{"model":"test-model","pad":"` : "y".repeat(512)));
          sent += 1;
        },
      });
      const response = await fetch(new URL("/v1/chat/completions", main()), {
        method: "POST",
        headers: { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/json" },
        body,
        duplex: "half",
      });
      const text = await response.text();
      return { status: response.status, headers: response.headers, text, json: JSON.parse(text) };
    });
    assertError(chunked, 413, "body_too_large");
  });

  test("invalid JSON, a non-object body, or a missing model → 400 bad_request", async () => {
    for (const body of [
      "{not json",
      "[1,2]",
      "null",
      JSON.stringify({ messages: [] }),
      JSON.stringify({ model: 7 }),
      "",
    ]) {
      assertError(
        await notForwarded(() => post(main(), "/v1/chat/completions", body, { token: TOKEN })),
        400,
        "bad_request",
      );
    }
    assertError(
      await notForwarded(() => post(main(), "/v1/chat/completions", { ...CHAT, stream: "yes" }, { token: TOKEN })),
      400,
      "bad_request",
    );
  });

  test("a model outside ALLOWED_MODELS → 403; an empty allowlist allows none, `*` any", async () => {
    assertError(
      await notForwarded(() =>
        post(main(), "/v1/chat/completions", { ...CHAT, model: "hidden-model" }, { token: TOKEN }),
      ),
      403,
      "model_not_allowed",
    );
    assertError(
      await notForwarded(() => post(workers.urls.none, "/v1/chat/completions", CHAT, { token: TOKEN })),
      403,
      "model_not_allowed",
    );
    const any = await post(
      workers.urls.any,
      "/v1/chat/completions",
      { ...CHAT, model: "hidden-model" },
      { token: TOKEN },
    );
    assert.equal(any.status, 200);
  });

  test("max_tokens over the cap → 400; absent → set to the cap; given → unchanged", async () => {
    assertError(
      await notForwarded(() => post(main(), "/v1/chat/completions", { ...CHAT, max_tokens: 1001 }, { token: TOKEN })),
      400,
      "max_tokens_too_large",
    );
    assertError(
      await notForwarded(() =>
        post(main(), "/v1/chat/completions", { ...CHAT, max_completion_tokens: 5000 }, { token: TOKEN }),
      ),
      400,
      "max_tokens_too_large",
    );
    assertError(
      await notForwarded(() =>
        post(main(), "/v1/completions", { model: "test-model", prompt: "p", max_tokens: -1 }, { token: TOKEN }),
      ),
      400,
      "bad_request",
    );

    assert.equal((await post(main(), "/v1/chat/completions", CHAT, { token: TOKEN })).status, 200);
    assert.equal(upstream.requests.at(-1).json.max_tokens, 1000);
    assert.equal(
      (await post(main(), "/v1/chat/completions", { ...CHAT, max_tokens: 12 }, { token: TOKEN })).status,
      200,
    );
    assert.equal(upstream.requests.at(-1).json.max_tokens, 12);
    assert.equal(
      (await post(main(), "/v1/completions", { model: "test-model", prompt: "p" }, { token: TOKEN })).status,
      200,
    );
    assert.equal(upstream.requests.at(-1).json.max_tokens, 1000);
  });

  test("max_completion_tokens is capped like max_tokens, on both endpoints, and bounds max_tokens", async () => {
    assertError(
      await notForwarded(() =>
        post(
          main(),
          "/v1/completions",
          { model: "test-model", prompt: "p", max_completion_tokens: 1001 },
          { token: TOKEN },
        ),
      ),
      400,
      "max_tokens_too_large",
    );
    // Given alone, it also becomes max_tokens, for an upstream that reads only that name.
    const alone = await post(main(), "/v1/chat/completions", { ...CHAT, max_completion_tokens: 12 }, { token: TOKEN });
    assert.equal(alone.status, 200, alone.text);
    assert.equal(upstream.requests.at(-1).json.max_tokens, 12);
    assert.equal(upstream.requests.at(-1).json.max_completion_tokens, 12);
    const both = await post(
      main(),
      "/v1/completions",
      { model: "test-model", prompt: "p", max_tokens: 0, max_completion_tokens: 5 },
      { token: TOKEN },
    );
    assert.equal(both.status, 200, both.text);
    assert.equal(upstream.requests.at(-1).json.max_tokens, 0, "max_tokens 0 (scoring with echo) was changed");
  });

  test("llama.cpp's n_predict and n_probs are refused, naming the field and what to use instead", async () => {
    for (const [route, body, field, instead] of [
      ["/v1/chat/completions", { ...CHAT, n_predict: 100000 }, "n_predict", "max_tokens"],
      ["/v1/completions", { model: "test-model", prompt: "p", n_predict: 5 }, "n_predict", "max_tokens"],
      ["/v1/completions", { model: "test-model", prompt: "p", n_probs: 100000 }, "n_probs", "logprobs"],
      ["/v1/chat/completions", { ...CHAT, n_probs: 1 }, "n_probs", "logprobs"],
    ]) {
      const response = await notForwarded(() => post(main(), route, body, { token: TOKEN }));
      assertError(response, 400, "bad_request");
      assert.match(response.json.error.message, new RegExp(`\`${field}\`.*\`${instead}\``), response.text);
    }
  });

  test("logprobs, top_logprobs and prompt_logprobs are capped at 20", async () => {
    const completion = { model: "test-model", prompt: "p", max_tokens: 1 };
    for (const [route, body, field] of [
      ["/v1/completions", { ...completion, logprobs: 21 }, "logprobs"],
      ["/v1/completions", { ...completion, logprobs: -1 }, "logprobs"],
      ["/v1/completions", { ...completion, logprobs: 2.5 }, "logprobs"],
      ["/v1/chat/completions", { ...CHAT, logprobs: true, top_logprobs: 21 }, "top_logprobs"],
      ["/v1/completions", { ...completion, prompt_logprobs: -1 }, "prompt_logprobs"],
      ["/v1/chat/completions", { ...CHAT, prompt_logprobs: 1000 }, "prompt_logprobs"],
    ]) {
      const response = await notForwarded(() => post(main(), route, body, { token: TOKEN }));
      assertError(response, 400, "bad_request");
      assert.match(response.json.error.message, new RegExp(`^\`${field}\``), response.text);
    }
    for (const [route, body] of [
      ["/v1/completions", { ...completion, logprobs: 20, echo: true }],
      ["/v1/completions", { ...completion, logprobs: 0, prompt_logprobs: 20 }],
      ["/v1/chat/completions", { ...CHAT, max_tokens: 1, logprobs: true, top_logprobs: 20 }],
      ["/v1/chat/completions", { ...CHAT, max_tokens: 1, logprobs: false }],
    ]) {
      const response = await post(main(), route, body, { token: TOKEN });
      assert.equal(response.status, 200, `${JSON.stringify(body)}: ${response.text}`);
      assert.deepEqual(upstream.requests.at(-1).json, body);
    }
  });

  test("n or best_of over MAX_CHOICES (an unparsable setting falls back to 8) → 400", async () => {
    assertError(
      await notForwarded(() => post(main(), "/v1/chat/completions", { ...CHAT, n: 9 }, { token: TOKEN })),
      400,
      "too_many_choices",
    );
    assertError(
      await notForwarded(() =>
        post(main(), "/v1/completions", { model: "test-model", prompt: "p", best_of: 9 }, { token: TOKEN }),
      ),
      400,
      "too_many_choices",
    );
    assert.equal((await post(main(), "/v1/chat/completions", { ...CHAT, n: 8 }, { token: TOKEN })).status, 200);
  });
});

describe("what reaches the upstream", () => {
  test("the upstream gets UPSTREAM_KEY and the checked body, never the client's token or headers", async () => {
    const response = await post(
      main(),
      "/v1/chat/completions",
      { ...CHAT, temperature: 0.25 },
      {
        token: TOKEN,
        headers: { Origin: APP, Cookie: "session=abc", "X-Client-Secret": "do-not-forward" },
      },
    );
    assert.equal(response.status, 200);
    const seen = upstream.requests.at(-1);
    assert.equal(seen.url, "/v1/chat/completions");
    assert.equal(seen.headers.authorization, `Bearer ${UPSTREAM_KEY}`);
    const raw = JSON.stringify(seen.headers);
    for (const secret of [TOKEN, "session=abc", "do-not-forward", APP])
      assert.ok(!raw.includes(secret), `${secret} was forwarded`);
    assert.deepEqual(seen.json, { ...CHAT, temperature: 0.25, max_tokens: 1000 });
    assert.ok(!JSON.stringify([...response.headers]).includes(UPSTREAM_KEY));
    assert.equal(response.headers.get("set-cookie"), null);
    assert.equal(response.headers.get("server")?.includes("fake-vllm") ?? false, false);
  });
});

describe("rate limits", () => {
  test("the in-isolate limiter answers 429 with Retry-After after RATE_LIMIT_PER_MINUTE, per client", async () => {
    for (let i = 0; i < 3; i++) {
      const ok = await get(workers.urls.limited, "/v1/models", { token: TOKEN_A });
      assert.equal(ok.status, 200, `request ${i + 1}: ${ok.text}`);
    }
    const limited = await get(workers.urls.limited, "/v1/models", { token: TOKEN_A });
    assertError(limited, 429, "rate_limited");
    const retryAfter = Number(limited.headers.get("retry-after"));
    assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60, `Retry-After: ${retryAfter}`);
    assert.equal(
      (await get(workers.urls.limited, "/v1/models", { token: TOKEN_B })).status,
      200,
      "another client was limited",
    );
  });

  test("a bound RATE_LIMITER is used instead", async () => {
    for (let i = 0; i < 2; i++)
      assert.equal((await get(workers.urls.bound, "/v1/models", { token: TOKEN_A })).status, 200);
    const limited = await get(workers.urls.bound, "/v1/models", { token: TOKEN_A });
    assertError(limited, 429, "rate_limited");
    assert.equal(limited.headers.get("retry-after"), "60");
  });
});

describe("upstream failures", () => {
  test("an unreachable upstream → 502 upstream_unavailable", async () => {
    assertError(
      await post(workers.urls.down, "/v1/chat/completions", CHAT, { token: TOKEN }),
      502,
      "upstream_unavailable",
    );
  });

  test("an upstream slower than UPSTREAM_TIMEOUT_MS → 504 upstream_timeout, at the timeout", async () => {
    const started = Date.now();
    const response = await post(main(), "/v1/chat/completions", { ...CHAT, model: "slow-headers" }, { token: TOKEN });
    const elapsed = Date.now() - started;
    assertError(response, 504, "upstream_timeout");
    assert.ok(elapsed >= 950 && elapsed < 1800, `answered after ${elapsed} ms; the timeout is 1000`);
  });

  test("an upstream 5xx → 502 upstream_error without the upstream's text", async () => {
    const response = await post(main(), "/v1/chat/completions", { ...CHAT, model: "fail-500" }, { token: TOKEN });
    assertError(response, 502, "upstream_error");
    assert.ok(!response.text.includes("internal failure"));
  });

  test("an upstream 4xx is passed on as upstream_rejected with its message, the upstream key blanked", async () => {
    const response = await post(main(), "/v1/chat/completions", { ...CHAT, model: "reject-400" }, { token: TOKEN });
    assertError(response, 400, "upstream_rejected");
    assert.match(response.json.error.message, /^bad request: /);
    assert.ok(!response.text.includes(UPSTREAM_KEY), response.text);
    assert.match(response.json.error.message, /\[redacted\]/);
  });

  test("a long upstream 4xx message is cut after the key is blanked, so no part of the key is left", async () => {
    const response = await post(
      main(),
      "/v1/chat/completions",
      { ...CHAT, model: "reject-400-long" },
      { token: TOKEN },
    );
    assertError(response, 400, "upstream_rejected");
    const { message } = response.json.error;
    assert.equal(message.length, 1000);
    // The cut falls 12 characters into the key: cutting first would leave those 12.
    assert.ok(!message.includes(UPSTREAM_KEY.slice(0, 12)), message.slice(980));
    assert.ok(message.startsWith(`${"y".repeat(988)}[redacted]`), message.slice(980));
  });

  test("an upstream 401 (the worker's key is wrong) → 502, and its text (which quotes the key) is dropped", async () => {
    const response = await post(main(), "/v1/chat/completions", { ...CHAT, model: "reject-401" }, { token: TOKEN });
    assertError(response, 502, "upstream_error");
    assert.ok(!response.text.includes(UPSTREAM_KEY));
  });
});

describe("pass-through", () => {
  test("/v1/completions with logprobs and echo: the upstream's logprobs arrive unchanged", async () => {
    const request = {
      model: "test-model",
      prompt: "The cat sat",
      max_tokens: 0,
      echo: true,
      logprobs: 2,
      temperature: 0,
    };
    const response = await post(main(), "/v1/completions", request, { token: TOKEN });
    assert.equal(response.status, 200, response.text);
    assert.deepEqual(response.json.choices[0].logprobs, LOGPROBS);
    assert.deepEqual(upstream.requests.at(-1).json, request);
  });

  test("/v1/embeddings", async () => {
    const response = await post(main(), "/v1/embeddings", { model: "test-model", input: ["a", "b"] }, { token: TOKEN });
    assert.equal(response.status, 200, response.text);
    assert.equal(response.json.data.length, 2);
    assert.deepEqual(response.json.data[1].embedding, [0.25, -0.5, 0.125]);
    assert.deepEqual(upstream.requests.at(-1).json, { model: "test-model", input: ["a", "b"] });
  });

  test("/v1/models: the upstream's list filtered by ALLOWED_MODELS, or made from it when the upstream has none", async () => {
    const listed = await get(main(), "/v1/models", { token: TOKEN });
    assert.equal(listed.status, 200);
    assert.deepEqual(listed.json, { object: "list", data: UPSTREAM_MODELS.filter((m) => m.id !== "hidden-model") });
    assert.equal(upstream.requests.at(-1).headers.authorization, `Bearer ${UPSTREAM_KEY}`);

    const all = await get(workers.urls.any, "/v1/models", { token: TOKEN });
    assert.deepEqual(
      all.json.data.map((m) => m.id),
      UPSTREAM_MODELS.map((m) => m.id),
    );

    const made = await get(workers.urls.bare, "/v1/models", { token: TOKEN });
    assert.equal(made.status, 200, made.text);
    assert.deepEqual(
      made.json.data.map((m) => m.id),
      ["test-model", "other-model"],
    );
  });

  test("other paths → 404, other methods → 405 with Allow", async () => {
    assertError(await get(main(), "/v1/audio/speech", { token: TOKEN }), 404, "not_found");
    assertError(await get(main(), "/", {}), 404, "not_found");
    const wrong = await get(main(), "/v1/chat/completions", { token: TOKEN });
    assertError(wrong, 405, "method_not_allowed");
    assert.equal(wrong.headers.get("allow"), "POST, OPTIONS");
    assertError(await post(main(), "/v1/models", {}, { token: TOKEN }), 405, "method_not_allowed");
  });
});
