/**
 * Passes an upstream response body on to the client as it arrives.
 *
 * The client's body is the readable side of an IdentityTransformStream, workerd's native
 * byte pipe, and a pump copies the upstream body into it chunk by chunk. A write resolves
 * only when the runtime has taken the chunk for the client, so nothing is buffered: SSE
 * tokens reach the client as the upstream produces them, and a slow client slows the
 * upstream read instead of filling memory. On the way the pump counts bytes for the log and
 * enforces UPSTREAM_TIMEOUT_MS as an idle timeout between chunks: a stream that goes quiet is
 * ended with an SSE error event (`event: error` and a `data:` line holding the usual error
 * JSON; a JSON body is cut off instead) and the upstream request is aborted.
 *
 * Why the native pipe and an explicit pump: when the client disconnects, workerd fails the
 * next writes to it (locally, the second write after the disconnect: the first still fits in
 * the socket's buffer). A write into the native pipe then rejects ("Network connection
 * lost"), and the pump aborts the upstream fetch, so the upstream stops generating for no
 * one, and settles `done`, so the request's log line is still written. With a JS-created
 * ReadableStream as the body, workerd dropped the stream without calling its `cancel` once
 * a write failed, so neither could be relied on. The caller must keep `done` alive with
 * `ctx.waitUntil`.
 */

import { errorBody, type ErrorCode } from "./errors.js";
import { withTimeout } from "./upstream.js";

export type RelayEnd = "complete" | "client_closed" | "upstream_timeout" | "upstream_failed";

export interface RelayOutcome {
  readonly bytes: number;
  readonly end: RelayEnd;
}

export interface Relay {
  readonly stream: ReadableStream<Uint8Array>;
  /** Settles (never rejects) once the body has ended, for any reason. */
  readonly done: Promise<RelayOutcome>;
}

export interface RelayOptions {
  readonly idleTimeoutMs: number;
  /** The body is an SSE stream: failures are reported in-band as an error event. */
  readonly sse: boolean;
  /** Aborts the upstream request. */
  readonly abortUpstream: () => void;
}

const LF = 10;

export function relay(body: ReadableStream<Uint8Array>, options: RelayOptions): Relay {
  const { readable, writable } = new IdentityTransformStream();
  const writer = writable.getWriter();
  const reader = body.getReader();
  let bytes = 0;
  /** Whether what was sent so far ends at an SSE event boundary (a blank line). */
  let atBoundary = true;
  let previousByte = LF;

  const write = async (chunk: Uint8Array): Promise<void> => {
    await writer.write(chunk);
    bytes += chunk.byteLength;
    if (chunk.byteLength > 0) {
      const last = chunk[chunk.byteLength - 1];
      const beforeLast = chunk.byteLength > 1 ? chunk[chunk.byteLength - 2] : previousByte;
      atBoundary = last === LF && beforeLast === LF;
      previousByte = last ?? LF;
    }
  };

  const stopUpstream = (): void => {
    options.abortUpstream();
    reader.cancel().catch(() => undefined);
  };

  /** Ends the client's body after an upstream failure: an SSE error event, or a cut-off body. */
  const fail = async (end: RelayEnd, code: ErrorCode, message: string): Promise<RelayOutcome> => {
    stopUpstream();
    if (options.sse) {
      const separator = atBoundary ? "" : "\n\n";
      const event = `${separator}event: error\ndata: ${errorBody(code, message)}\n\n`;
      await write(new TextEncoder().encode(event));
      await writer.close();
    } else {
      await writer.abort(new Error(message));
    }
    return { bytes, end };
  };

  const pump = async (): Promise<RelayOutcome> => {
    for (;;) {
      // Only the wait for the upstream is timed: a slow client is backpressure, not idleness.
      let result: ReadableStreamReadResult<Uint8Array> | null;
      try {
        result = await withTimeout(reader.read(), options.idleTimeoutMs);
      } catch {
        return fail("upstream_failed", "upstream_error", "the upstream stream broke off");
      }
      if (result === null) {
        return fail(
          "upstream_timeout",
          "upstream_timeout",
          `the upstream sent nothing for ${options.idleTimeoutMs} ms`,
        );
      }
      if (result.done) {
        await writer.close();
        return { bytes, end: "complete" };
      }
      try {
        await write(result.value);
      } catch {
        stopUpstream();
        return { bytes, end: "client_closed" };
      }
    }
  };

  // A failed write or close in `fail` or at the end means the client left first.
  const done = pump().catch((): RelayOutcome => {
    stopUpstream();
    return { bytes, end: "client_closed" };
  });
  return { stream: readable, done };
}
