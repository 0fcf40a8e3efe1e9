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
 * The idle timeout times only the upstream: a client that reads slowly is backpressure, and
 * one that never reads would stall the pump's write forever, holding the upstream request
 * open. So the whole body also has a deadline, MAX_STREAM_SECONDS, raced against every wait
 * (writes included): past it the upstream is aborted at once and the body ends like an idle
 * one, with the same error event. A client that does not take that event within the idle
 * timeout has its body cut off, so the request ends even then.
 *
 * Why the native pipe and an explicit pump: when the client disconnects, workerd fails the
 * next writes to it (locally, the second write after the disconnect: the first still fits in
 * the socket's buffer). A write into the native pipe then rejects ("Network connection
 * lost"), and the pump aborts the upstream fetch, so the upstream stops generating for no
 * one, and settles `done`, so the request's log line is still written. With a JS-created
 * ReadableStream as the body, workerd dropped the stream without calling its `cancel` once
 * a write failed, so neither could be relied on. With `enable_request_signal`, a client
 * that goes also aborts the upstream fetch through its request signal (upstream.ts), often
 * sooner; the read that then fails is the client's doing, not the upstream's, and ends as
 * `client_closed`. The caller must keep `done` alive with `ctx.waitUntil`.
 */

import { errorBody, type ErrorCode } from "./errors.js";
import { withTimeout } from "./upstream.js";

export type RelayEnd = "complete" | "client_closed" | "upstream_timeout" | "upstream_failed" | "max_duration";

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
  /** The longest wait for the upstream's next chunk; also how long the final error event may take. */
  readonly idleTimeoutMs: number;
  /** The longest the whole body may take (MAX_STREAM_SECONDS), however it is going. */
  readonly maxDurationMs: number;
  /** The body is an SSE stream: failures are reported in-band as an error event. */
  readonly sse: boolean;
  /** Aborts the upstream request. */
  readonly abortUpstream: () => void;
  /** The client's request signal: an upstream read that fails after it aborted is the client leaving. */
  readonly clientSignal?: AbortSignal;
}

/** What the pump's wait for the upstream came back with. */
type Read =
  | { readonly kind: "chunk"; readonly value: Uint8Array }
  | { readonly kind: "done" | "idle" | "broken" };

const LF = 10;
const EXPIRED = "expired";

export function relay(body: ReadableStream<Uint8Array>, options: RelayOptions): Relay {
  const { readable, writable } = new IdentityTransformStream();
  const writer = writable.getWriter();
  const reader = body.getReader();
  let bytes = 0;
  /** Whether what was written so far ends at an SSE event boundary (a blank line). */
  let atBoundary = true;
  let previousByte = LF;

  /**
   * The deadline for the whole body. Every wait of the pump is raced against it, the wait
   * for a client that does not read included: a stalled write would otherwise hold the
   * upstream open for as long as the client keeps its connection.
   */
  let deadline: ReturnType<typeof setTimeout> | null = null;
  const expired = new Promise<typeof EXPIRED>((resolve) => {
    deadline = setTimeout(() => resolve(EXPIRED), options.maxDurationMs);
  });

  /** Queues a chunk for the client; the boundary is noted at once, as writes keep their order. */
  const write = (chunk: Uint8Array): Promise<void> => {
    if (chunk.byteLength > 0) {
      const last = chunk[chunk.byteLength - 1];
      const beforeLast = chunk.byteLength > 1 ? chunk[chunk.byteLength - 2] : previousByte;
      atBoundary = last === LF && beforeLast === LF;
      previousByte = last ?? LF;
    }
    return writer.write(chunk).then(() => {
      bytes += chunk.byteLength;
    });
  };

  const nextRead = (): Promise<Read> =>
    withTimeout(reader.read(), options.idleTimeoutMs).then(
      (result): Read =>
        result === null ? { kind: "idle" } : result.done ? { kind: "done" } : { kind: "chunk", value: result.value },
      (): Read => ({ kind: "broken" }),
    );

  const stopUpstream = (): void => {
    options.abortUpstream();
    reader.cancel().catch(() => undefined);
  };

  /**
   * Ends the client's body after a failure, with the upstream already stopped: an SSE error
   * event (after any half-sent event) and a close, or a cut-off JSON body. A client that has
   * not taken the event within the idle timeout (it is not reading) has its body cut off, so
   * the request ends even then.
   */
  const fail = async (end: RelayEnd, code: ErrorCode, message: string): Promise<RelayOutcome> => {
    stopUpstream();
    if (options.sse) {
      const separator = atBoundary ? "" : "\n\n";
      const event = new TextEncoder().encode(`${separator}event: error\ndata: ${errorBody(code, message)}\n\n`);
      const ended = write(event)
        .then(() => writer.close())
        .then(
          () => true,
          () => false,
        );
      const taken = await withTimeout(ended, options.idleTimeoutMs);
      if (taken === false) return { bytes, end: "client_closed" };
      if (taken === true) return { bytes, end };
    }
    await withTimeout(
      writer.abort(new Error(message)).catch(() => undefined),
      options.idleTimeoutMs,
    );
    return { bytes, end };
  };

  const expire = (): Promise<RelayOutcome> =>
    fail(
      "max_duration",
      "upstream_timeout",
      `the response took longer than this worker's limit of ${options.maxDurationMs / 1000} s`,
    );

  const clientLeft = (): RelayOutcome => {
    stopUpstream();
    return { bytes, end: "client_closed" };
  };

  const pump = async (): Promise<RelayOutcome> => {
    for (;;) {
      // The wait for the upstream is timed (idle timeout); a slow client is backpressure, not
      // idleness, and only the overall deadline bounds it.
      const read = await Promise.race([nextRead(), expired]);
      if (read === EXPIRED) return expire();
      switch (read.kind) {
        case "broken":
          // Aborting the upstream on the client's signal makes the read fail: not the upstream's fault.
          if (options.clientSignal?.aborted === true) return clientLeft();
          return fail("upstream_failed", "upstream_error", "the upstream stream broke off");
        case "idle":
          return fail(
            "upstream_timeout",
            "upstream_timeout",
            `the upstream sent nothing for ${options.idleTimeoutMs} ms`,
          );
        case "done":
          await writer.close();
          return { bytes, end: "complete" };
        case "chunk": {
          const written = await Promise.race([
            write(read.value).then(
              () => "written" as const,
              () => "failed" as const,
            ),
            expired,
          ]);
          if (written === EXPIRED) return expire();
          if (written === "failed") return clientLeft();
        }
      }
    }
  };

  // A failed close at the end means the client left first.
  const done = pump()
    .catch(clientLeft)
    .finally(() => clearTimeout(deadline));
  return { stream: readable, done };
}
