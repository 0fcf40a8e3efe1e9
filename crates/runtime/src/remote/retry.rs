//! When a request to a hosted model is sent again, and after how long.
//!
//! Why: a host, or the edge worker in front of it, sometimes fails a request that a second
//! try would pass: a rate limit (429), a gateway that could not reach its upstream for a
//! moment (502: a pooled connection the upstream had just closed, a restart), an overloaded
//! host (503), or no reply at all (the connection refused or reset before the response's
//! headers). One such failure used to end a whole ingest. OpenAI's own clients retry these
//! twice with a short backoff; docmem does the same, and waits out a rate limit for the
//! time its `Retry-After` asks, a few times, so a burst of scoring requests slows down
//! instead of failing.
//!
//! What is never retried: a 504 (the host already spent the whole timeout on it; another
//! try doubles the wait), any other 4xx or 5xx (a second try gets the same answer), and a
//! streamed reply once its first bytes arrived (they have been handed on).
//!
//! The transports wait, because each front end waits its own way (a blocking sleep in the
//! CLI, a timer that a cancel interrupts in the npm package, `js/remote.js`, which follows
//! these rules); this module only decides.

use core::time::Duration;

/// How often a rate-limited (429) request is sent again.
pub const RATE_LIMIT_RETRIES: u32 = 4;
/// How often a request that got no reply, a 502 or a 503 is sent again.
pub const UNAVAILABLE_RETRIES: u32 = 2;
/// The first wait after a failure that is not a rate limit; it doubles on each try.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// The longest wait a `Retry-After` may ask for.
pub const MAX_WAIT: Duration = Duration::from_secs(30);

/// What came back from one try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome<'a> {
    /// A reply with this status and `Retry-After` header (if any).
    Reply {
        /// The HTTP status.
        status: u16,
        /// The `Retry-After` header's value, when the reply had one.
        retry_after: Option<&'a str>,
    },
    /// No reply: the connection failed before the response's headers arrived.
    NoReply,
}

/// How long to wait before sending the request again after try number `tries` (1 for the
/// first) ended in `outcome`, or `None` when it is not sent again.
pub fn retry_delay(outcome: Outcome<'_>, tries: u32) -> Option<Duration> {
    let backoff = || FIRST_BACKOFF * (1u32 << (tries.clamp(1, 8) - 1));
    match outcome {
        Outcome::Reply { status: 429, retry_after } => {
            (tries <= RATE_LIMIT_RETRIES).then(|| asked_wait(retry_after).unwrap_or(Duration::from_secs(1)).max(Duration::from_secs(1)))
        }
        Outcome::Reply { status: 502 | 503, retry_after } => {
            (tries <= UNAVAILABLE_RETRIES).then(|| asked_wait(retry_after).unwrap_or_else(backoff))
        }
        Outcome::NoReply => (tries <= UNAVAILABLE_RETRIES).then(backoff),
        Outcome::Reply { .. } => None,
    }
}

/// The wait a `Retry-After` of whole seconds asks for, at most [`MAX_WAIT`] (an HTTP date,
/// or anything else, is ignored: the caller's default applies).
fn asked_wait(retry_after: Option<&str>) -> Option<Duration> {
    let seconds: u64 = retry_after?.trim().parse().ok()?;
    Some(Duration::from_secs(seconds).min(MAX_WAIT))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(status: u16, retry_after: Option<&str>) -> Outcome<'_> {
        Outcome::Reply { status, retry_after }
    }

    #[test]
    fn a_rate_limit_is_waited_out_as_asked_a_few_times() {
        assert_eq!(retry_delay(reply(429, Some("3")), 1), Some(Duration::from_secs(3)));
        assert_eq!(retry_delay(reply(429, None), 1), Some(Duration::from_secs(1)));
        assert_eq!(retry_delay(reply(429, Some("0")), 2), Some(Duration::from_secs(1)), "at least a second");
        assert_eq!(retry_delay(reply(429, Some("3600")), 1), Some(MAX_WAIT));
        assert_eq!(retry_delay(reply(429, Some("Wed, 21 Oct 2026 07:28:00 GMT")), 1), Some(Duration::from_secs(1)));
        assert_eq!(retry_delay(reply(429, None), RATE_LIMIT_RETRIES), Some(Duration::from_secs(1)));
        assert_eq!(retry_delay(reply(429, None), RATE_LIMIT_RETRIES + 1), None);
    }

    #[test]
    fn an_unavailable_host_or_no_reply_is_tried_twice_more_with_a_doubling_wait() {
        for outcome in [reply(502, None), reply(503, None), Outcome::NoReply] {
            assert_eq!(retry_delay(outcome, 1), Some(Duration::from_millis(500)), "{outcome:?}");
            assert_eq!(retry_delay(outcome, 2), Some(Duration::from_millis(1000)), "{outcome:?}");
            assert_eq!(retry_delay(outcome, 3), None, "{outcome:?}");
        }
        assert_eq!(retry_delay(reply(503, Some("2")), 1), Some(Duration::from_secs(2)), "a 503's Retry-After is honoured");
    }

    #[test]
    fn other_statuses_are_final() {
        for status in [200, 400, 401, 403, 404, 408, 413, 500, 504] {
            assert_eq!(retry_delay(reply(status, Some("1")), 1), None, "{status}");
        }
    }
}
