/**
 * Passes an upstream response body on to the client as it arrives.
 *
 * The client's body is the readable side of an IdentityTransformStream, workerd's native
 * byte pipe, and a pump copies the upstream body into it chunk by chunk. A write resolves
 * only when the runtime has taken the chunk for the client, so a slow client slows the
 * upstream read instead of filling memory. On the way the pump counts the bytes written to
 * the client for the log and enforces UPSTREAM_TIMEOUT_MS as an idle timeout between
 * chunks: a stream that goes quiet is ended with an SSE error event (`event: error` and a
 * `data:` line holding the usual error JSON; a JSON body is cut off instead) and the
 * upstream request is aborted.
 *
 * An SSE body is passed on in whole events only. Each chunk is forwarded up to and including
 * the last event boundary in what has arrived (a blank line: `\n\n`, `\r\n\r\n`, or the
 * two line endings mixed), and the rest, the start of an event still arriving, is held back
 * until its boundary comes. So when the upstream fails mid-event (it breaks off, goes quiet,
 * or the duration cap ends it), the half-received event is dropped and the error event
 * follows on a clean boundary: a client never parses a truncated `data: {"choi` line as an
 * event. Nothing beyond that one partial event is held, and it is bounded: an event longer
 * than MAX_SSE_EVENT_BYTES ends the body with the error event (`upstream_error`). An
 * upstream that ends cleanly has any held remainder forwarded as it is. Upstreams write one
 * event per chunk in practice, so a chunk is usually forwarded whole, without a copy. (Bare
 * CR line endings, which no OpenAI-compatible server writes, are not taken as boundaries.)
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

/** The longest SSE event held back while its end has not arrived. */
export const MAX_SSE_EVENT_BYTES = 1_048_576;

const LF = 10;
const CR = 13;
const EXPIRED = "expired";

/**
 * Cuts an SSE byte stream at event boundaries: `take` returns what can go to the client now
 * (whole events) and holds back the event still arriving.
 */
class EventCutter {
  private held: Uint8Array[] = [];
  /** Bytes held back: the start of the event still arriving. */
  heldBytes = 0;
  /** The last bytes seen (up to 3), for a blank line split across chunks. */
  private seen: number[] = [];

  /** Takes the next chunk; returns the whole events it completes (with what was held), or null. */
  take(chunk: Uint8Array): Uint8Array | null {
    const end = lastEventEnd(chunk, this.seen);
    this.seen = [...this.seen, ...chunk.subarray(Math.max(0, chunk.byteLength - 3))].slice(-3);
    if (end < 0) {
      this.hold(chunk);
      return null;
    }
    const complete = this.heldBytes === 0 ? chunk.subarray(0, end) : concat([...this.held, chunk.subarray(0, end)]);
    this.held = [];
    this.heldBytes = 0;
    // A copy: the chunk's buffer goes to the client with the write of its first part.
    if (end < chunk.byteLength) this.hold(chunk.slice(end));
    return complete;
  }

  /** What is held back (never a whole event), emptied. */
  rest(): Uint8Array {
    const rest = concat(this.held);
    this.held = [];
    this.heldBytes = 0;
    return rest;
  }

  private hold(bytes: Uint8Array): void {
    this.held.push(bytes);
    this.heldBytes += bytes.byteLength;
  }
}

/**
 * The index just past the last event boundary in `chunk`, or -1. A boundary is a line ending
 * (LF, CRLF, or a CR the next line's ending follows) followed by the LF or CRLF of an empty
 * line; `before` holds the bytes that came before the chunk.
 */
function lastEventEnd(chunk: Uint8Array, before: readonly number[]): number {
  const at = (i: number): number | undefined => (i >= 0 ? chunk[i] : before[before.length + i]);
  for (let i = chunk.byteLength - 1; i >= 0; i--) {
    if (chunk[i] !== LF) continue;
    let j = i - 1;
    if (at(j) === CR) j -= 1;
    const previous = at(j);
    if (previous === LF || previous === CR) return i + 1;
  }
  return -1;
}

function concat(parts: readonly Uint8Array[]): Uint8Array {
  let total = 0;
  for (const part of parts) total += part.byteLength;
  const joined = new Uint8Array(total);
  let offset = 0;
  for (const part of parts) {
    joined.set(part, offset);
    offset += part.byteLength;
  }
  return joined;
}

export function relay(body: ReadableStream<Uint8Array>, options: RelayOptions): Relay {
  const { readable, writable } = new IdentityTransformStream();
  const writer = writable.getWriter();
  const reader = body.getReader();
  const events = options.sse ? new EventCutter() : null;
  /** Bytes the client's side has taken. */
  let bytes = 0;
  /**
   * Whether what was written ends at an event boundary. Whole events only are written, except
   * the held remainder at a clean end; an error event after that (the cap expiring while the
   * client takes it) needs a blank line first.
   */
  let atBoundary = true;

  /**
   * The deadline for the whole body. Every wait of the pump is raced against it, the wait
   * for a client that does not read included: a stalled write would otherwise hold the
   * upstream open for as long as the client keeps its connection.
   */
  let deadline: ReturnType<typeof setTimeout> | null = null;
  const expired = new Promise<typeof EXPIRED>((resolve) => {
    deadline = setTimeout(() => resolve(EXPIRED), options.maxDurationMs);
  });

  const write = (chunk: Uint8Array): Promise<void> =>
    writer.write(chunk).then(() => {
      bytes += chunk.byteLength;
    });

  /** Writes to the client, raced against the deadline. */
  const forward = (chunk: Uint8Array): Promise<"written" | "failed" | typeof EXPIRED> =>
    Promise.race([
      write(chunk).then(
        () => "written" as const,
        () => "failed" as const,
      ),
      expired,
    ]);

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
   * event (any held partial event dropped) and a close, or a cut-off JSON body. A client that
   * has not taken the event within the idle timeout (it is not reading) has its body cut
   * off, so the request ends even then.
   */
  const fail = async (end: RelayEnd, code: ErrorCode, message: string): Promise<RelayOutcome> => {
    stopUpstream();
    if (events !== null) {
      events.rest();
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
        case "done": {
          const rest = events?.rest();
          if (rest !== undefined && rest.byteLength > 0) {
            atBoundary = false;
            const written = await forward(rest);
            if (written === EXPIRED) return expire();
            if (written === "failed") return clientLeft();
          }
          await writer.close();
          return { bytes, end: "complete" };
        }
        case "chunk": {
          const ready = events === null ? read.value : events.take(read.value);
          if (ready !== null && ready.byteLength > 0) {
            const written = await forward(ready);
            if (written === EXPIRED) return expire();
            if (written === "failed") return clientLeft();
          }
          if (events !== null && events.heldBytes > MAX_SSE_EVENT_BYTES) {
            return fail(
              "upstream_failed",
              "upstream_error",
              `an event from the upstream was longer than ${MAX_SSE_EVENT_BYTES} bytes`,
            );
          }
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
