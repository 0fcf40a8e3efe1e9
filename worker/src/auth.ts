/**
 * Who is calling: every request but a CORS preflight carries `Authorization: Bearer <token>`.
 *
 * Two kinds of token are accepted. Static tokens (CLIENT_TOKENS, `name=token` pairs) are for
 * servers and the CLI; they are compared as SHA-256 digests in constant time against every
 * configured token, so neither the comparison nor which entry matched shows in the timing.
 * Short-lived HMAC tokens (token.ts) are for browsers, issued by the site. With neither secret
 * configured the worker accepts no one: an unconfigured deployment is closed, not open.
 * The result is the client's name, used for rate limits and logs; the token itself goes no
 * further than this module.
 */

import type { Config } from "./config.js";
import { WorkerError } from "./errors.js";
import { TOKEN_PREFIX, verifyToken } from "./token.js";

const BEARER_CHALLENGE = { "WWW-Authenticate": 'Bearer realm="docmem"' };

/** Returns the client's name, or throws a 401 `WorkerError`. */
export async function authenticate(authorization: string | null, config: Config): Promise<string> {
  if (config.clientTokens.length === 0 && config.signingKey === null) {
    throw unauthorized("this worker has no client credentials configured");
  }
  const match = authorization === null ? null : /^Bearer +([^\s]+) *$/i.exec(authorization);
  const token = match?.[1];
  if (token === undefined) throw unauthorized("missing bearer token");

  const client = await matchStaticToken(token, config);
  if (client !== null) return client;

  if (config.signingKey !== null && token.startsWith(`${TOKEN_PREFIX}.`)) {
    const check = await verifyToken(config.signingKey, token, config.tokenMaxTtlSeconds);
    if (check.ok) return check.client;
    if (check.reason === "expired") {
      throw new WorkerError("token_expired", "the token has expired; ask the site for a new one", {
        headers: BEARER_CHALLENGE,
      });
    }
    if (check.reason === "ttl_too_long") throw unauthorized("the token's lifetime is longer than this worker allows");
    if (check.reason === "not_yet_valid") {
      throw unauthorized("the token's issue time is in the future; check the issuing server's clock");
    }
  }
  throw unauthorized("invalid token");
}

function unauthorized(message: string): WorkerError {
  return new WorkerError("unauthorized", message, { headers: BEARER_CHALLENGE });
}

/** Compares against every configured token (no early exit) and returns the matching name. */
async function matchStaticToken(token: string, config: Config): Promise<string | null> {
  if (config.clientTokens.length === 0) return null;
  const given = await sha256(token);
  let found: string | null = null;
  for (const entry of config.clientTokens) {
    if (constantTimeEqual(given, await sha256(entry.token)) && found === null) found = entry.client;
  }
  return found;
}

async function sha256(text: string): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)));
}

/** Both are SHA-256 digests, so the lengths match and workerd's constant-time compare applies. */
function constantTimeEqual(a: Uint8Array, b: Uint8Array): boolean {
  return a.byteLength === b.byteLength && crypto.subtle.timingSafeEqual(a, b);
}
