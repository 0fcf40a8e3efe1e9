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
//! these rules, with the same table of cases in `tests/wasm/remote.mjs`); this module
//! only decides.

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

/// The failures of one request so far, counted by kind: each kind has its own budget, so
/// rate limits waited out do not use up the tries a dropped connection gets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Retries {
    rate_limited: u32,
    unavailable: u32,
}

impl Retries {
    /// Count `outcome` and say how long to wait before sending the request again, or
    /// `None` when it is final (a success, a status never retried, or its kind's budget
    /// spent).
    pub fn next(&mut self, outcome: Outcome<'_>) -> Option<Duration> {
        match outcome {
            Outcome::Reply { status: 429, retry_after } => {
                self.rate_limited += 1;
                let wait = asked_wait(retry_after).unwrap_or(Duration::from_secs(1)).max(Duration::from_secs(1));
                (self.rate_limited <= RATE_LIMIT_RETRIES).then_some(wait)
            }
            Outcome::Reply { status: 502 | 503, .. } | Outcome::NoReply => {
                self.unavailable += 1;
                let asked = match outcome {
                    Outcome::Reply { retry_after, .. } => asked_wait(retry_after),
                    Outcome::NoReply => None,
                };
                let backoff = FIRST_BACKOFF * (1u32 << (self.unavailable.min(8) - 1));
                (self.unavailable <= UNAVAILABLE_RETRIES).then(|| asked.unwrap_or(backoff))
            }
            Outcome::Reply { .. } => None,
        }
    }
}

/// The wait a `Retry-After` of whole seconds (ASCII digits only) asks for, at most
/// [`MAX_WAIT`] (however many digits); an HTTP date, or anything else, is ignored: the
/// caller's default applies. `js/remote.js` reads it the same way.
fn asked_wait(retry_after: Option<&str>) -> Option<Duration> {
    let digits = retry_after?.trim();
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let seconds = digits.parse::<u64>().unwrap_or(u64::MAX);
    Some(Duration::from_secs(seconds).min(MAX_WAIT))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(status: u16, retry_after: Option<&str>) -> Outcome<'_> {
        Outcome::Reply { status, retry_after }
    }

    /// The waits for `outcomes` in turn, on one request.
    fn waits(outcomes: &[Outcome<'_>]) -> Vec<Option<Duration>> {
        let mut r = Retries::default();
        outcomes.iter().map(|&o| r.next(o)).collect()
    }

    /// The first wait after `outcome`.
    fn retry_delay(outcome: Outcome<'_>) -> Option<Duration> {
        Retries::default().next(outcome)
    }

    #[test]
    fn a_rate_limit_is_waited_out_as_asked_a_few_times() {
        let s = Duration::from_secs;
        assert_eq!(retry_delay(reply(429, Some("3"))), Some(s(3)));
        assert_eq!(retry_delay(reply(429, None)), Some(s(1)));
        assert_eq!(retry_delay(reply(429, Some("0"))), Some(s(1)), "at least a second");
        assert_eq!(retry_delay(reply(429, Some("3600"))), Some(MAX_WAIT));
        assert_eq!(retry_delay(reply(429, Some("99999999999999999999999"))), Some(MAX_WAIT), "too long for u64");
        for odd in ["Wed, 21 Oct 2026 07:28:00 GMT", "+5", "-1", "1.5", ""] {
            assert_eq!(retry_delay(reply(429, Some(odd))), Some(s(1)), "{odd:?} is not whole seconds");
        }
        let limited = waits(&[reply(429, None); 5]);
        assert_eq!(limited, [Some(s(1)), Some(s(1)), Some(s(1)), Some(s(1)), None], "{RATE_LIMIT_RETRIES} retries");
    }

    #[test]
    fn an_unavailable_host_or_no_reply_is_tried_twice_more_with_a_doubling_wait() {
        let ms = Duration::from_millis;
        for outcome in [reply(502, None), reply(503, None), Outcome::NoReply] {
            assert_eq!(waits(&[outcome; 3]), [Some(ms(500)), Some(ms(1000)), None], "{outcome:?}");
        }
        assert_eq!(retry_delay(reply(503, Some("2"))), Some(Duration::from_secs(2)), "a 503's Retry-After is honoured");
        assert_eq!(retry_delay(reply(502, Some("soon"))), Some(ms(500)), "an unreadable one is not");
        // Each kind has its own budget: rate limits do not use up a dropped connection's tries.
        let mixed = waits(&[reply(429, None), reply(429, None), Outcome::NoReply, reply(502, None), Outcome::NoReply]);
        assert_eq!(mixed, [Some(Duration::from_secs(1)), Some(Duration::from_secs(1)), Some(ms(500)), Some(ms(1000)), None]);
    }

    #[test]
    fn other_statuses_are_final() {
        for status in [200, 400, 401, 403, 404, 408, 413, 500, 504] {
            assert_eq!(retry_delay(reply(status, Some("1"))), None, "{status}");
        }
    }
}
