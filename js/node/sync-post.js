// postSync in Node (remote.js's transport; why it is needed: its header). A worker thread
// has no synchronous HTTP, so one helper thread, started on first use, does the fetch and
// hands the reply over a MessagePort while the calling thread waits on an Atomics flag
// (the pattern of the synckit package).

import { MessageChannel, Worker, receiveMessageOnPort } from 'node:worker_threads';
import { RATE_LIMIT_RETRIES, TIMEOUT_MS, UNAVAILABLE_RETRIES, retries, unreachable } from '../remote.js';

// The helper thread's code: fetch each request it is sent (again as \`retries\` says,
// its source and constants copied in), post the reply on the request's port, then raise
// its flag (the port message is queued before the waiter wakes).
const HELPER = `
const RATE_LIMIT_RETRIES = ${RATE_LIMIT_RETRIES};
const UNAVAILABLE_RETRIES = ${UNAVAILABLE_RETRIES};
${retries.toString()}
const { parentPort } = require('node:worker_threads');
parentPort.on('message', async ({ url, headers, body, timeoutMs, port, flag }) => {
  let reply;
  const failures = retries();
  const deadline = AbortSignal.timeout(timeoutMs);
  for (;;) {
    let delay;
    try {
      const response = await fetch(url, { method: 'POST', headers, body, signal: deadline });
      delay = failures.next(response.status, response.headers.get('retry-after'));
      if (delay === null) {
        reply = { status: response.status, body: await response.text() };
        break;
      }
      await response.body?.cancel();
    } catch (e) {
      delay = deadline.aborted ? null : failures.next(null, null);
      if (delay === null) {
        reply = { error: (e && e.cause && e.cause.message) || (e && e.message) || String(e) };
        break;
      }
    }
    await new Promise((resolve) => setTimeout(resolve, delay));
  }
  port.postMessage(reply);
  port.close();
  Atomics.store(flag, 0, 1);
  Atomics.notify(flag, 0);
});`;

/** postSync in Node: the helper thread fetches while this thread waits (see the header). */
export function nodeSyncPost(headers) {
  let helper = null;
  return (url, body) => {
    if (!helper) {
      helper = new Worker(HELPER, { eval: true });
      helper.unref();
    }
    const flag = new Int32Array(new SharedArrayBuffer(4));
    const { port1, port2 } = new MessageChannel();
    helper.postMessage({ url, headers, body, timeoutMs: TIMEOUT_MS, port: port2, flag }, [port2]);
    // A little longer than the helper's own timeout, which answers first.
    const woke = Atomics.wait(flag, 0, 0, TIMEOUT_MS + 5_000);
    const message = receiveMessageOnPort(port1);
    port1.close();
    if (woke === 'timed-out' || !message) throw unreachable(url, new Error('the request thread did not answer'));
    if (message.message.error) throw unreachable(url, new Error(message.message.error));
    return { status: message.message.status, body: message.message.body };
  };
}
