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
//!
//! Nothing a server sends can make it hold more than [`SseLimits`] allow: a line longer than
//! `max_line_bytes`, an event whose data grows past `max_event_bytes` or a body past
//! `max_body_bytes` fails with an [`SseError`] naming the limit, before the bytes are kept.
//! The defaults are far above what a model's response needs (a whole response in one `data:`
//! line included) and far below what would exhaust memory.

use std::fmt;
use std::mem;

/// The default longest line: 4 MiB. An OpenAI-compatible server that sends a whole response
/// with a large tool call in one `data:` line stays well under it.
pub const DEFAULT_MAX_LINE_BYTES: usize = 4 * 1024 * 1024;

/// The default largest event (its `data:` lines joined): 16 MiB.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// The default largest body: 256 MiB, about a million streamed deltas of framing and text.
pub const DEFAULT_MAX_BODY_BYTES: u64 = 256 * 1024 * 1024;

/// How much of an event stream the parser accepts; see the [module docs](self).
///
/// ```
/// use harness_model::sse::{SseError, SseLimit, SseLimits, SseParser};
///
/// let limits = SseLimits { max_line_bytes: 16, ..SseLimits::default() };
/// let mut parser = SseParser::with_limits(limits);
/// assert!(parser.push(b"data: short\n\n").is_ok());
/// let error = parser.push(b"data: this line never ends").unwrap_err();
/// assert_eq!(error, SseError { limit: SseLimit::Line, max: 16 });
/// assert!(error.to_string().contains("max_line_bytes"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SseLimits {
    /// The longest line, in bytes, without its terminator
    /// (default [`DEFAULT_MAX_LINE_BYTES`]).
    pub max_line_bytes: usize,
    /// The largest event: its `data:` values joined with `\n`, in bytes
    /// (default [`DEFAULT_MAX_EVENT_BYTES`]).
    pub max_event_bytes: usize,
    /// The largest body, in bytes (default [`DEFAULT_MAX_BODY_BYTES`]).
    pub max_body_bytes: u64,
}

impl Default for SseLimits {
    fn default() -> Self {
        SseLimits {
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            max_event_bytes: DEFAULT_MAX_EVENT_BYTES,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
        }
    }
}

/// Which of the [`SseLimits`] a stream broke.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SseLimit {
    /// [`SseLimits::max_line_bytes`].
    Line,
    /// [`SseLimits::max_event_bytes`].
    Event,
    /// [`SseLimits::max_body_bytes`].
    Body,
}

impl SseLimit {
    /// The name of the setting, as in [`SseLimits`].
    pub fn setting(self) -> &'static str {
        match self {
            SseLimit::Line => "max_line_bytes",
            SseLimit::Event => "max_event_bytes",
            SseLimit::Body => "max_body_bytes",
        }
    }
}

impl fmt::Display for SseLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SseLimit::Line => "an event-stream line",
            SseLimit::Event => "an event",
            SseLimit::Body => "a response body",
        })
    }
}

/// An event stream broke one of the parser's [`SseLimits`]. The parser stays failed: every
/// later [`push`](SseParser::push) returns the same error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{limit} is larger than {max} bytes (`{setting}`)", setting = limit.setting())]
pub struct SseError {
    /// The limit.
    pub limit: SseLimit,
    /// Its value, in bytes.
    pub max: u64,
}

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

/// An incremental Server-Sent Events parser, bounded by [`SseLimits`] (the defaults unless
/// built [`with_limits`](Self::with_limits)).
///
/// ```
/// use harness_model::sse::SseParser;
///
/// let mut parser = SseParser::default();
/// let mut events = parser.push(b"event: ping\ndata: {\"a\"").unwrap();
/// assert!(events.is_empty());
/// events.extend(parser.push(b":1}\r\n\r\n").unwrap());
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
    limits: SseLimits,
    /// Bytes pushed so far.
    body_bytes: u64,
    /// The limit the stream broke; the parser takes nothing after it.
    failed: Option<SseError>,
}

impl SseParser {
    /// A parser bounded by `limits`.
    pub fn with_limits(limits: SseLimits) -> Self {
        SseParser {
            limits,
            ..SseParser::default()
        }
    }

    /// Feeds the next piece of the body; returns the events it completed, or the limit the
    /// stream broke (then the events of this piece are dropped: the stream is unusable).
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<SseEvent>, SseError> {
        if let Some(error) = self.failed {
            return Err(error);
        }
        let mut events = Vec::new();
        let outcome = self.push_checked(bytes, &mut events);
        if let Err(error) = outcome {
            self.fail(error);
            return Err(error);
        }
        Ok(events)
    }

    fn push_checked(
        &mut self,
        mut bytes: &[u8],
        events: &mut Vec<SseEvent>,
    ) -> Result<(), SseError> {
        self.body_bytes = self.body_bytes.saturating_add(bytes.len() as u64);
        if self.body_bytes > self.limits.max_body_bytes {
            return Err(self.broke(SseLimit::Body));
        }
        if !self.started {
            // A byte-order mark may open the stream; it can itself be split across pieces.
            const BOM: &[u8] = b"\xEF\xBB\xBF";
            self.line.extend_from_slice(bytes);
            if self.line.len() < BOM.len() && BOM.starts_with(&self.line) {
                return Ok(());
            }
            self.started = true;
            let held = mem::take(&mut self.line);
            let rest = held.strip_prefix(BOM).unwrap_or(&held);
            return self.feed(rest, events);
        }
        if self.after_cr && !bytes.is_empty() {
            self.after_cr = false;
            if let Some(rest) = bytes.strip_prefix(b"\n") {
                bytes = rest;
            }
        }
        self.feed(bytes, events)
    }

    /// The error for `limit`.
    fn broke(&self, limit: SseLimit) -> SseError {
        let max = match limit {
            SseLimit::Line => self.limits.max_line_bytes as u64,
            SseLimit::Event => self.limits.max_event_bytes as u64,
            SseLimit::Body => self.limits.max_body_bytes,
        };
        SseError { limit, max }
    }

    /// Stops for good: what was held is dropped.
    fn fail(&mut self, error: SseError) {
        self.failed = Some(error);
        self.line = Vec::new();
        self.data = String::new();
        self.event = String::new();
    }

    /// Checks that the line being read may grow by `more` bytes.
    fn check_line(&self, more: usize) -> Result<(), SseError> {
        if self.line.len().saturating_add(more) > self.limits.max_line_bytes {
            return Err(self.broke(SseLimit::Line));
        }
        Ok(())
    }

    fn feed(&mut self, mut bytes: &[u8], events: &mut Vec<SseEvent>) -> Result<(), SseError> {
        while let Some(end) = bytes.iter().position(|&b| b == b'\n' || b == b'\r') {
            let terminator = bytes[end];
            self.check_line(end)?;
            if self.line.is_empty() {
                self.process_line(&bytes[..end], events)?;
            } else {
                self.line.extend_from_slice(&bytes[..end]);
                let line = mem::take(&mut self.line);
                let processed = self.process_line(&line, events);
                // Keep the allocation for the next long line.
                self.line = line;
                self.line.clear();
                processed?;
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
        self.check_line(bytes.len())?;
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    fn process_line(&mut self, line: &[u8], events: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if line.is_empty() {
            if let Some(event) = self.dispatch() {
                events.push(event);
            }
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(());
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
                let joined = self.data.len() + usize::from(self.has_data) + value.len();
                if joined > self.limits.max_event_bytes {
                    return Err(self.broke(SseLimit::Event));
                }
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
        Ok(())
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
    /// finished, so its content cannot be trusted). A parser that broke a limit returns
    /// nothing.
    pub fn finish(&mut self) -> Option<SseEvent> {
        self.line.clear();
        self.after_cr = false;
        if self.failed.is_some() {
            return None;
        }
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
            events.extend(parser.push(&input[start..cut]).unwrap());
            start = cut;
        }
        events.extend(parser.push(&input[start..]).unwrap());
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
        assert!(parser.push(b"event: nothing\n\n").unwrap().is_empty());
        let events = parser
            .push(b"retry: 1500\ndata: x\n\nretry: soon\ndata: y\n\n")
            .unwrap();
        assert_eq!(events[0].retry, Some(1500));
        assert_eq!(events[0].event, "message");
        assert_eq!(events[1].retry, None);
    }

    #[test]
    fn finish_returns_complete_lines_and_drops_a_cut_line() {
        let mut parser = SseParser::default();
        assert!(parser.push(b"data: [DONE]\n").unwrap().is_empty());
        assert_eq!(parser.finish(), Some(event("message", "[DONE]", None)));
        let mut parser = SseParser::default();
        assert!(parser.push(b"data: {\"cut\":").unwrap().is_empty());
        assert_eq!(parser.finish(), None);
    }

    #[test]
    fn invalid_utf8_and_odd_bytes_never_panic() {
        let mut parser = SseParser::default();
        let events = parser
            .push(b"data: \xff\xfe\x00\n\nid: a\x00b\ndata: \n\n:\r\r\r\n")
            .unwrap();
        assert_eq!(events[0].data, "\u{fffd}\u{fffd}\u{0}");
        assert_eq!(events[1].id, None);
        assert_eq!(events[1].data, "");
    }

    fn small_limits() -> SseLimits {
        SseLimits {
            max_line_bytes: 64,
            max_event_bytes: 256,
            max_body_bytes: 4096,
        }
    }

    /// Pushes `piece` until the parser fails; asserts it never holds more than the limits
    /// allow on the way. Returns the error.
    fn push_until_failure(parser: &mut SseParser, piece: &[u8]) -> SseError {
        for _ in 0..100_000 {
            match parser.push(piece) {
                Ok(_) => {
                    assert!(parser.line.len() <= parser.limits.max_line_bytes);
                    assert!(parser.data.len() <= parser.limits.max_event_bytes);
                }
                Err(error) => return error,
            }
        }
        panic!("the parser took 100,000 pieces without failing");
    }

    #[test]
    fn an_endless_line_fails_at_the_line_limit() {
        for piece in [
            &b"x"[..],
            b"data: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
            &[b'a'; 200],
        ] {
            let mut parser = SseParser::with_limits(small_limits());
            let error = push_until_failure(&mut parser, piece);
            assert_eq!(
                error,
                SseError {
                    limit: SseLimit::Line,
                    max: 64
                }
            );
            // Failed for good, holding nothing.
            assert_eq!(parser.push(b"\n\n"), Err(error));
            assert_eq!(parser.finish(), None);
            assert_eq!(parser.line.capacity(), 0);
        }
        // A line of exactly the limit passes, one byte more does not, however it is cut.
        let exact = format!("data:{}\n\n", "y".repeat(59));
        let mut parser = SseParser::with_limits(small_limits());
        assert_eq!(parser.push(exact.as_bytes()).unwrap().len(), 1);
        let over = format!("data:{}\n\n", "y".repeat(60));
        for cut in 0..over.len() {
            let mut parser = SseParser::with_limits(small_limits());
            let first = parser.push(&over.as_bytes()[..cut]);
            let second = parser.push(&over.as_bytes()[cut..]);
            assert_eq!(
                first.and(second),
                Err(SseError {
                    limit: SseLimit::Line,
                    max: 64
                }),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn endless_data_lines_fail_at_the_event_limit() {
        let mut parser = SseParser::with_limits(small_limits());
        let error = push_until_failure(&mut parser, b"data: 0123456789\n");
        assert_eq!(
            error,
            SseError {
                limit: SseLimit::Event,
                max: 256
            }
        );
        assert_eq!(parser.data.capacity(), 0);
        // Events that each stay under the limit pass, however many there are.
        let mut parser = SseParser::with_limits(SseLimits {
            max_body_bytes: u64::MAX,
            ..small_limits()
        });
        for _ in 0..10_000 {
            assert_eq!(parser.push(b"data: 0123456789\n\n").unwrap().len(), 1);
        }
    }

    #[test]
    fn an_endless_body_fails_at_the_body_limit() {
        let mut parser = SseParser::with_limits(small_limits());
        let error = push_until_failure(&mut parser, b": keep-alive\n");
        assert_eq!(
            error,
            SseError {
                limit: SseLimit::Body,
                max: 4096
            }
        );
        assert!(error.to_string().contains("max_body_bytes"), "{error}");
    }

    proptest::proptest! {
        /// Any bytes, cut anywhere: no panic, the limits hold, and the events are the same
        /// whichever way the body is cut.
        #[test]
        fn arbitrary_bytes_cut_anywhere(
            body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512),
            cuts in proptest::collection::vec(0usize..512, 0..8),
        ) {
            let parse = |cuts: &[usize]| {
                let mut parser = SseParser::with_limits(small_limits());
                let mut events = Vec::new();
                let mut start = 0;
                let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (body.len() + 1)).collect();
                cuts.sort_unstable();
                cuts.push(body.len());
                for cut in cuts {
                    match parser.push(&body[start..cut]) {
                        Ok(more) => events.extend(more),
                        Err(error) => return Ok(Err(error)),
                    }
                    proptest::prop_assert!(parser.line.len() <= 64);
                    proptest::prop_assert!(parser.data.len() <= 256);
                    start = cut;
                }
                events.extend(parser.finish());
                Ok::<_, proptest::test_runner::TestCaseError>(Ok(events))
            };
            proptest::prop_assert_eq!(parse(&[])?, parse(&cuts)?);
        }
    }
}
