//! A Server-Sent Events parser: the framing both HTTP providers stream their responses in.
//!
//! [`SseParser`] takes the response body in whatever pieces the network delivers and yields
//! complete [`SseEvent`]s. It follows the WHATWG event-stream rules: lines end with `\r\n`, `\n`
//! or `\r`; a blank line dispatches the event; `data:` lines accumulate, joined with `\n`;
//! `event:` names the event; `id:` sets the last event id; lines starting with `:` are
//! comments; a field without a colon has an empty value; one space after the colon is dropped.
//! A piece may end anywhere, even inside a line terminator or a multi-byte UTF-8 character:
//! bytes are held until their line is complete and only then decoded (invalid UTF-8 becomes
//! U+FFFD, never a panic).

use std::mem;

/// One dispatched Server-Sent Event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, or `message` when the event had none.
    pub event: String,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
    /// The last event id seen on the stream (it carries over to later events).
    pub id: Option<String>,
    /// The reconnection time the server asked for, in milliseconds.
    pub retry: Option<u64>,
}

/// An incremental Server-Sent Events parser.
///
/// ```
/// use harness_model::sse::SseParser;
///
/// let mut parser = SseParser::default();
/// let mut events = parser.push(b"event: ping\ndata: {\"a\"");
/// assert!(events.is_empty());
/// events.extend(parser.push(b":1}\r\n\r\n"));
/// assert_eq!(events[0].event, "ping");
/// assert_eq!(events[0].data, "{\"a\":1}");
/// ```
#[derive(Debug, Default)]
pub struct SseParser {
    /// The bytes of the line being read.
    line: Vec<u8>,
    /// The previous piece ended with `\r`: a `\n` starting the next one belongs to it.
    after_cr: bool,
    /// Whether the byte-order mark check at the start of the stream is done.
    started: bool,
    event: String,
    data: String,
    has_data: bool,
    last_id: Option<String>,
    retry: Option<u64>,
}

impl SseParser {
    /// Feeds the next piece of the body; returns the events it completed.
    pub fn push(&mut self, mut bytes: &[u8]) -> Vec<SseEvent> {
        let mut events = Vec::new();
        if !self.started {
            // A byte-order mark may open the stream; it can itself be split across pieces.
            const BOM: &[u8] = b"\xEF\xBB\xBF";
            self.line.extend_from_slice(bytes);
            if self.line.len() < BOM.len() && BOM.starts_with(&self.line) {
                return events;
            }
            self.started = true;
            let held = mem::take(&mut self.line);
            let rest = held.strip_prefix(BOM).unwrap_or(&held);
            self.feed(rest, &mut events);
            return events;
        }
        if self.after_cr && !bytes.is_empty() {
            self.after_cr = false;
            if let Some(rest) = bytes.strip_prefix(b"\n") {
                bytes = rest;
            }
        }
        self.feed(bytes, &mut events);
        events
    }

    fn feed(&mut self, mut bytes: &[u8], events: &mut Vec<SseEvent>) {
        while let Some(end) = bytes.iter().position(|&b| b == b'\n' || b == b'\r') {
            let terminator = bytes[end];
            if self.line.is_empty() {
                self.process_line(&bytes[..end], events);
            } else {
                self.line.extend_from_slice(&bytes[..end]);
                let line = mem::take(&mut self.line);
                self.process_line(&line, events);
                // Keep the allocation for the next long line.
                self.line = line;
                self.line.clear();
            }
            bytes = &bytes[end + 1..];
            if terminator == b'\r' {
                match bytes.first() {
                    Some(b'\n') => bytes = &bytes[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
        }
        self.line.extend_from_slice(bytes);
    }

    fn process_line(&mut self, line: &[u8], events: &mut Vec<SseEvent>) {
        if line.is_empty() {
            if let Some(event) = self.dispatch() {
                events.push(event);
            }
            return;
        }
        if line[0] == b':' {
            return;
        }
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        let value = String::from_utf8_lossy(value);
        match name {
            b"event" => self.event = value.into_owned(),
            b"data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(&value);
                self.has_data = true;
            }
            b"id" if !value.contains('\0') => self.last_id = Some(value.into_owned()),
            b"retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                self.retry = value.parse().ok();
            }
            _ => {}
        }
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let event = mem::take(&mut self.event);
        let retry = self.retry.take();
        if !mem::replace(&mut self.has_data, false) {
            return None;
        }
        Some(SseEvent {
            event: if event.is_empty() {
                "message".to_owned()
            } else {
                event
            },
            data: mem::take(&mut self.data),
            id: self.last_id.clone(),
            retry,
        })
    }

    /// Ends the stream. An event whose data lines were complete but that the server never
    /// closed with a blank line is returned; a line cut off mid-way is dropped (it was never
    /// finished, so its content cannot be trusted).
    pub fn finish(&mut self) -> Option<SseEvent> {
        self.line.clear();
        self.after_cr = false;
        self.dispatch()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_in_pieces(input: &[u8], cuts: &[usize]) -> Vec<SseEvent> {
        let mut parser = SseParser::default();
        let mut events = Vec::new();
        let mut start = 0;
        for &cut in cuts {
            events.extend(parser.push(&input[start..cut]));
            start = cut;
        }
        events.extend(parser.push(&input[start..]));
        events.extend(parser.finish());
        events
    }

    fn event(name: &str, data: &str, id: Option<&str>) -> SseEvent {
        SseEvent {
            event: name.to_owned(),
            data: data.to_owned(),
            id: id.map(str::to_owned),
            retry: None,
        }
    }

    /// Every way of splitting the input in two or three pieces gives the same events.
    fn assert_split_anywhere(input: &[u8], expected: &[SseEvent]) {
        assert_eq!(parse_in_pieces(input, &[]), expected, "whole");
        for a in 0..=input.len() {
            assert_eq!(parse_in_pieces(input, &[a]), expected, "split at {a}");
        }
        for a in 0..=input.len() {
            for b in a..=input.len() {
                assert_eq!(
                    parse_in_pieces(input, &[a, b]),
                    expected,
                    "split at {a} and {b}"
                );
            }
        }
        let single_bytes: Vec<usize> = (1..input.len()).collect();
        assert_eq!(
            parse_in_pieces(input, &single_bytes),
            expected,
            "byte by byte"
        );
    }

    #[test]
    fn fields_comments_and_multi_line_data() {
        let input = "\u{feff}: a comment\nevent: message_start\ndata: {\"a\":\ndata:1}\nid: 7\n\n\
                     data: second\r\n\r\nevent: ping\rdata\r\r: keep-alive\n\ndata:  two spaces\n\n";
        assert_split_anywhere(
            input.as_bytes(),
            &[
                event("message_start", "{\"a\":\n1}", Some("7")),
                event("message", "second", Some("7")),
                event("ping", "", Some("7")),
                event("message", " two spaces", Some("7")),
            ],
        );
    }

    #[test]
    fn utf8_split_across_pieces() {
        let input = "data: héllo — 世界 🦀\n\nevent: é\ndata: ok\n\n";
        assert_split_anywhere(
            input.as_bytes(),
            &[
                event("message", "héllo — 世界 🦀", None),
                event("é", "ok", None),
            ],
        );
    }

    #[test]
    fn crlf_split_between_cr_and_lf_is_one_line_end() {
        // `\r` then `\n` in the next piece must not count as two line ends (which would
        // dispatch an event early).
        let input = b"data: a\r\ndata: b\r\n\r\n";
        assert_split_anywhere(input, &[event("message", "a\nb", None)]);
    }

    #[test]
    fn events_without_data_are_not_dispatched_and_retry_is_read() {
        let mut parser = SseParser::default();
        assert!(parser.push(b"event: nothing\n\n").is_empty());
        let events = parser.push(b"retry: 1500\ndata: x\n\nretry: soon\ndata: y\n\n");
        assert_eq!(events[0].retry, Some(1500));
        assert_eq!(events[0].event, "message");
        assert_eq!(events[1].retry, None);
    }

    #[test]
    fn finish_returns_complete_lines_and_drops_a_cut_line() {
        let mut parser = SseParser::default();
        assert!(parser.push(b"data: [DONE]\n").is_empty());
        assert_eq!(parser.finish(), Some(event("message", "[DONE]", None)));
        let mut parser = SseParser::default();
        assert!(parser.push(b"data: {\"cut\":").is_empty());
        assert_eq!(parser.finish(), None);
    }

    #[test]
    fn invalid_utf8_and_odd_bytes_never_panic() {
        let mut parser = SseParser::default();
        let events = parser.push(b"data: \xff\xfe\x00\n\nid: a\x00b\ndata: \n\n:\r\r\r\n");
        assert_eq!(events[0].data, "\u{fffd}\u{fffd}\u{0}");
        assert_eq!(events[1].id, None);
        assert_eq!(events[1].data, "");
    }
}
