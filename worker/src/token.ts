/**
 * Short-lived client tokens that the site issues and the worker checks, with no shared state.
 *
 * A web page cannot hold a long-lived secret, so the site's server side signs a token for the
 * browser: `dm1.<client>.<iat>.<exp>.<signature>`, where iat (issued at) and exp (expires) are
 * Unix seconds and signature is base64url(HMAC-SHA256(TOKEN_SIGNING_KEY, "dm1.<client>.<iat>.<exp>")).
 *
 * The lifetime is judged from the signed issue time, not from the time left: a token is valid
 * only while `exp > now`, and only if `exp - iat <= TOKEN_MAX_TTL_SECONDS`. Measuring time
 * left instead (`exp - now`) would let a token signed to live a year become valid in its last
 * TOKEN_MAX_TTL_SECONDS, so a leaked signing call could mint long-lived tokens after all. An
 * issue time in the future (beyond CLOCK_SKEW_SECONDS of clock difference between the site and
 * the worker) is refused too, or a token dated ahead would stretch its usable life past the
 * cap. Client names cannot contain dots, so the five parts split unambiguously. Only WebCrypto
 * is used: the same module runs in workerd and in Node 20 (worker/scripts/issue-token.mjs
 * imports the compiled copy).
 */

export const TOKEN_PREFIX = "dm1";

/** How far ahead of the worker's clock a token's issue time may be (the site's clock may run fast). */
export const CLOCK_SKEW_SECONDS = 60;

/** A client's name: its id in rate limits and logs, and the middle of an HMAC token. */
export const CLIENT_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** Unix seconds as written in a token: decimal digits, no sign, no leading zero. */
const UNIX_SECONDS = /^(0|[1-9][0-9]{0,11})$/;

export type TokenCheck =
  | { readonly ok: true; readonly client: string; readonly issued: number; readonly expires: number }
  | {
      readonly ok: false;
      readonly reason: "malformed" | "bad_signature" | "expired" | "ttl_too_long" | "not_yet_valid";
    };

/** Signs a token for `client`, issued at `now` (Unix seconds), that expires `ttlSeconds` later. */
export async function issueToken(
  key: string,
  client: string,
  ttlSeconds: number,
  now: number = unixNow(),
): Promise<string> {
  if (key.length === 0) throw new Error("the signing key is empty");
  if (!CLIENT_NAME.test(client)) throw new Error("a client name is 1 to 64 of A-Z a-z 0-9 _ -");
  if (!Number.isSafeInteger(ttlSeconds) || ttlSeconds < 1) throw new Error("the TTL is a whole number of seconds ≥ 1");
  const issued = Math.floor(now);
  if (!Number.isSafeInteger(issued) || issued < 0) throw new Error("the issue time is Unix seconds ≥ 0");
  const payload = `${TOKEN_PREFIX}.${client}.${issued}.${issued + ttlSeconds}`;
  const signature = await crypto.subtle.sign("HMAC", await hmacKey(key), utf8(payload));
  return `${payload}.${base64url(new Uint8Array(signature))}`;
}

/**
 * Checks a token's signature (in constant time, by WebCrypto's verify), then its lifetime and
 * times. The signature is checked first so a forged token learns nothing about the rest. The
 * lifetime (exp − iat, both signed) is checked before the clock, so a token that could never
 * be valid is refused as such, not as expired (a new one like it would fail again).
 */
export async function verifyToken(
  key: string,
  token: string,
  maxTtlSeconds: number,
  now: number = unixNow(),
): Promise<TokenCheck> {
  const parts = token.split(".");
  if (parts.length !== 5 || key.length === 0) return { ok: false, reason: "malformed" };
  const [prefix, client, issuedText, expiryText, signatureText] = parts as [string, string, string, string, string];
  if (
    prefix !== TOKEN_PREFIX ||
    !CLIENT_NAME.test(client) ||
    !UNIX_SECONDS.test(issuedText) ||
    !UNIX_SECONDS.test(expiryText)
  ) {
    return { ok: false, reason: "malformed" };
  }
  const signature = fromBase64url(signatureText);
  // Only the canonical spelling of the 32 bytes, so one token has one written form.
  if (signature === null || signature.byteLength !== 32 || base64url(signature) !== signatureText) {
    return { ok: false, reason: "malformed" };
  }
  const payload = `${prefix}.${client}.${issuedText}.${expiryText}`;
  if (!(await crypto.subtle.verify("HMAC", await hmacKey(key), signature, utf8(payload)))) {
    return { ok: false, reason: "bad_signature" };
  }
  const issued = Number(issuedText);
  const expires = Number(expiryText);
  const current = Math.floor(now);
  if (expires <= issued) return { ok: false, reason: "malformed" };
  if (expires - issued > maxTtlSeconds) return { ok: false, reason: "ttl_too_long" };
  if (issued > current + CLOCK_SKEW_SECONDS) return { ok: false, reason: "not_yet_valid" };
  if (expires <= current) return { ok: false, reason: "expired" };
  return { ok: true, client, issued, expires };
}

function unixNow(): number {
  return Math.floor(Date.now() / 1000);
}

function hmacKey(key: string): Promise<CryptoKey> {
  return crypto.subtle.importKey("raw", utf8(key), { name: "HMAC", hash: "SHA-256" }, false, ["sign", "verify"]);
}

function utf8(text: string): Uint8Array {
  return new TextEncoder().encode(text);
}

function base64url(bytes: Uint8Array): string {
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function fromBase64url(text: string): Uint8Array | null {
  if (!/^[A-Za-z0-9_-]+$/.test(text)) return null;
  let binary: string;
  try {
    binary = atob(text.replace(/-/g, "+").replace(/_/g, "/"));
  } catch {
    return null;
  }
  return Uint8Array.from(binary, (char) => char.charCodeAt(0));
}
