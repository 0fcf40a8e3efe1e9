/**
 * One JSON log line per request, for operations: who, what, how it went, how long.
 *
 * The line is built from fixed fields only, each set by the code that knows it, and written
 * once when the request is over (for a stream: when the stream ends, so its bytes and its
 * end are known). What it must never hold is kept out by construction, not by filtering:
 * there is no field for prompt, message, document or answer text, for tokens or keys, or for
 * the upstream's error text. The model is logged only when ALLOWED_MODELS names it (a refused
 * "model", or any model under `*`, is arbitrary client text and is logged as "other"), and a
 * path only when it is a served one (others are logged as "other": a URL can carry anything,
 * a pasted key included).
 */

import type { Config } from "./config.js";
import type { ErrorCode } from "./errors.js";
import type { RelayEnd } from "./relay.js";

export interface LogLine {
  time: string;
  client: string | null;
  method: string;
  path: string;
  model: string | null;
  status: number;
  code: ErrorCode | null;
  duration_ms: number;
  upstream_ms: number | null;
  bytes_in: number;
  bytes_out: number;
  stream: boolean;
  /** How a relayed body ended: complete, client_closed, upstream_timeout, upstream_failed. */
  end: RelayEnd | null;
}

const KNOWN_METHODS: ReadonlySet<string> = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);

export class RequestLog {
  private readonly started = Date.now();
  private isWritten = false;
  private markWritten: () => void = () => undefined;
  readonly line: LogLine;
  /**
   * Settles once the line is written. index.ts hands it to `ctx.waitUntil`: workerd cancels a
   * request whose client has gone, and only waitUntil work is then sure to run on, so without
   * it the line of a request the client left would be lost.
   */
  readonly written: Promise<void> = new Promise((resolve) => {
    this.markWritten = resolve;
  });

  constructor(request: Request, servedPaths: ReadonlySet<string>) {
    const path = new URL(request.url).pathname;
    this.line = {
      time: new Date(this.started).toISOString(),
      client: null,
      method: KNOWN_METHODS.has(request.method) ? request.method : "other",
      path: servedPaths.has(path) ? path : "other",
      model: null,
      status: 0,
      code: null,
      duration_ms: 0,
      upstream_ms: null,
      bytes_in: 0,
      bytes_out: 0,
      stream: false,
      end: null,
    };
  }

  /** Writes the line (once; later calls are ignored). */
  write(): void {
    if (this.isWritten) return;
    this.isWritten = true;
    this.line.duration_ms = Date.now() - this.started;
    console.log(JSON.stringify(this.line));
    this.markWritten();
  }
}

/**
 * The model as logged: its name only when the allowlist is an explicit set that contains it.
 * Under `*` any string passes the allowlist, so the name is the client's own text and could
 * carry anything (a prompt fragment, a pasted key); it is logged as "other".
 */
export function loggedModel(model: string, allowed: Config["allowedModels"]): string {
  return allowed !== "any" && allowed.has(model) ? model : "other";
}
