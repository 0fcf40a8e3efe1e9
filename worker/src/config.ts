/**
 * The worker's configuration, read from its environment bindings on every request.
 *
 * Bindings only exist inside a handler, and reading a dozen strings costs microseconds, so
 * there is no cache to invalidate. Reading is defensive: a value that does not parse (a typo in
 * wrangler.toml, a number given as text or as a TOML integer) falls back to its default rather
 * than failing requests. The one setting without a safe default is UPSTREAM_URL; without a
 * usable one `upstreamUrl` is null and index.ts answers every request `misconfigured`.
 * Allowlists default closed: no model and no browser origin is allowed until listed.
 *
 * Secrets are the exception to falling back. A static token or a signing key shorter than
 * MIN_SECRET_CHARS can be guessed: accepting it would open the worker to guessing, and
 * skipping it would lock its client out without a word why. So it sets `misconfigured`, and
 * index.ts answers every request 500 with that message, which names the setting and the
 * client (never the secret) and says how long the secret is and must be.
 */

import { CLIENT_NAME } from "./token.js";

/** The bindings: vars from wrangler.toml, secrets from `wrangler secret put`. */
export interface Env {
  UPSTREAM_URL?: unknown;
  UPSTREAM_KEY?: unknown;
  CLIENT_TOKENS?: unknown;
  TOKEN_SIGNING_KEY?: unknown;
  TOKEN_MAX_TTL_SECONDS?: unknown;
  ALLOWED_ORIGINS?: unknown;
  ALLOWED_MODELS?: unknown;
  MAX_BODY_BYTES?: unknown;
  MAX_TOKENS_CAP?: unknown;
  MAX_CHOICES?: unknown;
  RATE_LIMIT_PER_MINUTE?: unknown;
  UPSTREAM_TIMEOUT_MS?: unknown;
  MAX_STREAM_SECONDS?: unknown;
  AUTH_FAILURES_PER_MINUTE?: unknown;
  MAX_CONCURRENT_PER_CLIENT?: unknown;
  /** Optional Workers Rate Limiting binding; when bound it replaces the in-isolate limiter. */
  RATE_LIMITER?: unknown;
}

export interface StaticToken {
  readonly client: string;
  readonly token: string;
}

export interface Config {
  /** Base URL without a trailing slash; requests go to `${upstreamUrl}/v1/...`. */
  readonly upstreamUrl: string | null;
  readonly upstreamKey: string | null;
  readonly clientTokens: readonly StaticToken[];
  readonly signingKey: string | null;
  readonly tokenMaxTtlSeconds: number;
  readonly allowedOrigins: ReadonlySet<string>;
  /** "any" when ALLOWED_MODELS is `*`; an empty set allows nothing. */
  readonly allowedModels: ReadonlySet<string> | "any";
  readonly maxBodyBytes: number;
  readonly maxTokensCap: number;
  readonly maxChoices: number;
  readonly rateLimitPerMinute: number;
  readonly upstreamTimeoutMs: number;
  /** The longest a relayed response body may take, however it is going (a client may never read). */
  readonly maxStreamSeconds: number;
  /** Failed authentications from one address in a minute before it is refused (auththrottle.ts). */
  readonly authFailuresPerMinute: number;
  /** Generations (a request's choices) one client may have running at once (concurrency.ts). */
  readonly maxConcurrentPerClient: number;
  readonly rateLimiter: RateLimit | null;
  /** Why the configuration cannot be served (a secret too short), or null; index.ts answers 500 with it. */
  readonly misconfigured: string | null;
}

export const DEFAULTS = {
  tokenMaxTtlSeconds: 3600,
  maxBodyBytes: 1_048_576,
  maxTokensCap: 4096,
  maxChoices: 8,
  rateLimitPerMinute: 60,
  upstreamTimeoutMs: 60_000,
  maxStreamSeconds: 900,
  authFailuresPerMinute: 10,
  maxConcurrentPerClient: 8,
} as const;

/** The fewest characters a static token or TOKEN_SIGNING_KEY may have (32 hex digits: 128 bits). */
export const MIN_SECRET_CHARS = 32;

/** MAX_STREAM_SECONDS above a day is taken as a day (a timer cannot count much past 24 days). */
const MAX_STREAM_SECONDS_LIMIT = 86_400;

export function readConfig(env: Env): Config {
  const models = list(env.ALLOWED_MODELS);
  const clientTokens = staticTokens(env.CLIENT_TOKENS);
  const signingKey = secret(env.TOKEN_SIGNING_KEY);
  return {
    upstreamUrl: upstreamBase(env.UPSTREAM_URL),
    upstreamKey: secret(env.UPSTREAM_KEY),
    clientTokens,
    signingKey,
    tokenMaxTtlSeconds: positiveInt(env.TOKEN_MAX_TTL_SECONDS, DEFAULTS.tokenMaxTtlSeconds),
    allowedOrigins: new Set(list(env.ALLOWED_ORIGINS)),
    allowedModels: models.includes("*") ? "any" : new Set(models),
    maxBodyBytes: positiveInt(env.MAX_BODY_BYTES, DEFAULTS.maxBodyBytes),
    maxTokensCap: positiveInt(env.MAX_TOKENS_CAP, DEFAULTS.maxTokensCap),
    maxChoices: positiveInt(env.MAX_CHOICES, DEFAULTS.maxChoices),
    rateLimitPerMinute: positiveInt(env.RATE_LIMIT_PER_MINUTE, DEFAULTS.rateLimitPerMinute),
    upstreamTimeoutMs: positiveInt(env.UPSTREAM_TIMEOUT_MS, DEFAULTS.upstreamTimeoutMs),
    maxStreamSeconds: Math.min(
      positiveInt(env.MAX_STREAM_SECONDS, DEFAULTS.maxStreamSeconds),
      MAX_STREAM_SECONDS_LIMIT,
    ),
    authFailuresPerMinute: positiveInt(env.AUTH_FAILURES_PER_MINUTE, DEFAULTS.authFailuresPerMinute),
    maxConcurrentPerClient: positiveInt(env.MAX_CONCURRENT_PER_CLIENT, DEFAULTS.maxConcurrentPerClient),
    rateLimiter: rateLimitBinding(env.RATE_LIMITER),
    misconfigured: weakSecret(clientTokens, signingKey),
  };
}

/** The first secret shorter than MIN_SECRET_CHARS, described without its value; null when none is. */
function weakSecret(tokens: readonly StaticToken[], signingKey: string | null): string | null {
  for (const { client, token } of tokens) {
    const chars = characters(token);
    if (chars < MIN_SECRET_CHARS) {
      return `CLIENT_TOKENS: the token for '${client}' is ${chars} characters; tokens must be at least ${MIN_SECRET_CHARS}`;
    }
  }
  if (signingKey !== null && characters(signingKey) < MIN_SECRET_CHARS) {
    return `TOKEN_SIGNING_KEY is ${characters(signingKey)} characters; it must be at least ${MIN_SECRET_CHARS}`;
  }
  return null;
}

/** Unicode code points, so a token is measured the way a person counts it. */
function characters(text: string): number {
  return [...text].length;
}

/** A whole number ≥ 1 given as a number or as decimal digits; anything else is the default. */
function positiveInt(value: unknown, fallback: number): number {
  const n =
    typeof value === "number"
      ? value
      : typeof value === "string" && /^\s*\d{1,15}\s*$/.test(value)
        ? Number(value)
        : NaN;
  return Number.isSafeInteger(n) && n >= 1 ? n : fallback;
}

function secret(value: unknown): string | null {
  return typeof value === "string" && value.length > 0 ? value : null;
}

/** A comma-separated list, trimmed, without empty entries. */
function list(value: unknown): string[] {
  if (typeof value !== "string") return [];
  return value
    .split(",")
    .map((item) => item.trim())
    .filter((item) => item.length > 0);
}

function upstreamBase(value: unknown): string | null {
  if (typeof value !== "string") return null;
  let url: URL;
  try {
    url = new URL(value.trim());
  } catch {
    return null;
  }
  if ((url.protocol !== "http:" && url.protocol !== "https:") || url.search !== "" || url.hash !== "") return null;
  if (url.username !== "" || url.password !== "") return null;
  return url.href.replace(/\/+$/, "");
}

/** `name=token` pairs; a malformed pair is skipped rather than failing every request. */
function staticTokens(value: unknown): StaticToken[] {
  const tokens: StaticToken[] = [];
  for (const pair of list(value)) {
    const eq = pair.indexOf("=");
    if (eq <= 0) continue;
    const client = pair.slice(0, eq).trim();
    const token = pair.slice(eq + 1).trim();
    if (CLIENT_NAME.test(client) && token.length > 0) tokens.push({ client, token });
  }
  return tokens;
}

function rateLimitBinding(value: unknown): RateLimit | null {
  if (typeof value !== "object" || value === null) return null;
  return typeof (value as { limit?: unknown }).limit === "function" ? (value as RateLimit) : null;
}
