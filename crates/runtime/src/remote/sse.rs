//! Server-sent events, as a streamed completion arrives: `data: {json}` lines, events
//! ended by a blank line, `data: [DONE]` at the end.
//!
//! Bytes arrive in pieces cut anywhere, inside a line or inside a UTF-8 character, so the
//! decoder keeps what it has not yet seen the end of. Only `data` fields are read (the API
//! sends no others that matter); comments (`: keep-alive`) are skipped.

/// Turns pieces of an event stream into the data of each event.
#[derive(Debug, Default)]
pub struct SseDecoder {
    /// Bytes after the last line break.
    partial: Vec<u8>,
    /// The data lines of the event being read.
    data: Vec<String>,
    /// Bytes in `data`.
    data_bytes: usize,
    /// The largest line, and event, accepted: a host that never ends a line or an event
    /// is not buffered forever.
    max_line: usize,
}

/// A line or event longer than this is refused (a completion chunk is a few hundred bytes;
/// a logprobs chunk with 20 alternatives a few kilobytes).
pub const DEFAULT_MAX_LINE_BYTES: usize = 4 << 20;

impl SseDecoder {
    /// A decoder with the default line limit.
    pub fn new() -> Self {
        SseDecoder { partial: Vec::new(), data: Vec::new(), data_bytes: 0, max_line: DEFAULT_MAX_LINE_BYTES }
    }

    /// Feed `bytes`; returns the data of every event they complete, in order. Errors when a
    /// line grows past the limit or is not UTF-8.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<String>, String> {
        let mut events = Vec::new();
        let mut rest = bytes;
        while let Some(at) = rest.iter().position(|&b| b == b'\n') {
            self.partial.extend_from_slice(&rest[..at]);
            rest = &rest[at + 1..];
            let mut line = std::mem::take(&mut self.partial);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            let line = String::from_utf8(line).map_err(|_| "the event stream is not UTF-8".to_string())?;
            self.line(&line, &mut events)?;
        }
        self.partial.extend_from_slice(rest);
        if self.partial.len() > self.max_line {
            return Err(format!("an event stream line is longer than {} bytes", self.max_line));
        }
        Ok(events)
    }

    /// The event left when the stream ends without a final blank line.
    pub fn finish(&mut self) -> Option<String> {
        let mut events = Vec::new();
        if !self.partial.is_empty() {
            let line = String::from_utf8_lossy(&std::mem::take(&mut self.partial)).into_owned();
            // Past the limit it is dropped: the stream is over anyway.
            let _ = self.line(&line, &mut events);
        }
        if !self.data.is_empty() {
            events.push(std::mem::take(&mut self.data).join("\n"));
        }
        events.pop()
    }

    fn line(&mut self, line: &str, events: &mut Vec<String>) -> Result<(), String> {
        if line.is_empty() {
            if !self.data.is_empty() {
                events.push(std::mem::take(&mut self.data).join("\n"));
                self.data_bytes = 0;
            }
        } else if let Some(value) = line.strip_prefix("data:") {
            self.data_bytes += value.len();
            if self.data_bytes > self.max_line {
                return Err(format!("an event stream event is longer than {} bytes", self.max_line));
            }
            self.data.push(value.strip_prefix(' ').unwrap_or(value).to_string());
        }
        // Comments (":…") and other fields (event, id, retry) carry nothing we use.
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_anywhere_come_out_whole() {
        let stream = "data: {\"a\":\"é\"}\n\n: keep-alive\n\ndata: one\r\ndata: two\r\n\r\ndata: [DONE]\n\n".as_bytes();
        for cut in 0..stream.len() {
            let mut d = SseDecoder::new();
            let mut got = d.push(&stream[..cut]).unwrap();
            got.extend(d.push(&stream[cut..]).unwrap());
            assert_eq!(got, ["{\"a\":\"é\"}", "one\ntwo", "[DONE]"], "cut at {cut}");
        }
    }

    #[test]
    fn a_last_event_without_blank_line_is_kept() {
        let mut d = SseDecoder::new();
        assert!(d.push(b"data: x").unwrap().is_empty());
        assert_eq!(d.finish().as_deref(), Some("x"));
    }

    #[test]
    fn an_endless_line_or_event_is_refused() {
        let mut d = SseDecoder { max_line: 8, ..SseDecoder::new() };
        assert!(d.push(b"data: 0123456789").is_err());
        let mut d = SseDecoder { max_line: 8, ..SseDecoder::new() };
        assert!(d.push(b"data: 0123\ndata: 4567\ndata: 89\n").is_err(), "data lines that never end their event");
    }

    #[test]
    fn bytes_that_are_not_utf8_are_refused() {
        let mut d = SseDecoder::new();
        assert!(d.push(b"data: \xff\xfe\n").is_err());
    }
}
