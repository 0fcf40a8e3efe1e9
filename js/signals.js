// The signals the client (client.js) and its worker (worker-ops.js) share without
// messages: an Int32Array over a SharedArrayBuffer, read by the worker between the steps of
// a long call (a message would wait behind the call it is meant to stop). Where the page is
// not cross-origin isolated there is no shared memory: the client then cancels by
// message, or by terminating the worker.

/** The slots, each an Int32 read and written with Atomics. */
export const SIGNAL = Object.freeze({
  /** 1: cancel the request being served (the client sets it, and clears it for the next). */
  CANCEL: 0,
  /** Requests the client has sent and the worker has not yet answered: the client adds one per request, the worker takes it back as it answers; a background memory's window gives way while any wait. */
  WAITING: 1,
  /** The id of a background memory to stop. */
  STOP_MEMORY: 2,
  /** 1: background memories paused. */
  PAUSE_MEMORIES: 3,
  /** The number of the newest read-ahead the client has sent: an older one stops. */
  READ_AHEAD: 4,
});

/** Bytes of the shared buffer (the slots, rounded up). */
export const SIGNAL_BYTES = 32;
