//! Live streams: a model's text deltas (`message.text-delta`) and a running tool's output
//! (`tool.output-delta`), redacted as they stream, with a [`StreamRedactor`] per stream so that
//! a value split across deltas is still caught and no delta waits longer than the window.
//!
//! A stream's state goes when its `end` delta comes. Streams that never end (a model call cut
//! off, a tool that hangs until the run is aborted) are bounded: past [`MAX_LIVE_STREAMS`] the
//! stream idle the longest is dropped, with the few bytes it held back (they were never shown,
//! and the stored message or result goes through its own redaction).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use harness_tags::util::lock;

use crate::error::RedactionError;
use crate::operator::Operator;
use crate::redactor::Redactor;
use crate::stream::StreamRedactor;

/// The most streams redacted at once (model parts and tool output streams).
pub const MAX_LIVE_STREAMS: usize = 256;

/// The live streams of one target (assistant text, or tool output).
pub(crate) struct LiveStreams {
    redactor: Result<Arc<Redactor>, RedactionError>,
    operator: Option<Operator>,
    streams: Mutex<Streams>,
}

#[derive(Default)]
struct Streams {
    by_key: HashMap<String, (u64, StreamRedactor<'static>)>,
    tick: u64,
}

impl LiveStreams {
    pub(crate) fn new(
        redactor: Result<Arc<Redactor>, RedactionError>,
        operator: Option<Operator>,
    ) -> Self {
        LiveStreams {
            redactor,
            operator,
            streams: Mutex::default(),
        }
    }

    /// The redacted text of `text` on the stream `key` that can be shown now; with `end`, also
    /// everything the stream held back, and the stream is done.
    pub(crate) fn push(
        &self,
        key: String,
        thread: Option<&str>,
        text: &str,
        end: bool,
    ) -> Result<String, RedactionError> {
        let redactor = self.redactor.as_ref().map_err(Clone::clone)?;
        let mut streams = lock(&self.streams);
        let mut stream = match streams.by_key.remove(&key) {
            Some((_, stream)) => stream,
            None if text.is_empty() && end => return Ok(String::new()),
            None => {
                let stream = StreamRedactor::shared(Arc::clone(redactor), thread);
                match &self.operator {
                    Some(operator) => stream.operator(operator.clone()),
                    None => stream,
                }
            }
        };
        // On an error the stream is dropped with what it held: fail-closed, nothing shown.
        let mut shown = stream.push(text)?;
        if end {
            shown.push_str(&stream.finish()?);
            return Ok(shown);
        }
        streams.keep(key, stream);
        Ok(shown)
    }

    /// How many streams are open.
    #[cfg(test)]
    pub(crate) fn open(&self) -> usize {
        lock(&self.streams).by_key.len()
    }
}

impl Streams {
    fn keep(&mut self, key: String, stream: StreamRedactor<'static>) {
        if self.by_key.len() >= MAX_LIVE_STREAMS
            && let Some(idle) = self
                .by_key
                .iter()
                .min_by_key(|(_, (tick, _))| *tick)
                .map(|(key, _)| key.clone())
        {
            self.by_key.remove(&idle);
        }
        self.tick += 1;
        self.by_key.insert(key, (self.tick, stream));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_split_across_deltas_is_caught_and_the_end_releases_the_rest() {
        let live = LiveStreams::new(Ok(Arc::new(Redactor::new().unwrap())), None);
        let mut shown = String::new();
        for delta in ["mail bob@exa", "mple.com now", ", thanks"] {
            shown += &live.push("m1".into(), None, delta, false).unwrap();
        }
        assert_eq!(live.open(), 1);
        shown += &live.push("m1".into(), None, "", true).unwrap();
        assert_eq!(shown, "mail <EMAIL_ADDRESS> now, thanks");
        assert_eq!(live.open(), 0);
    }

    #[test]
    fn streams_that_never_end_are_bounded() {
        let live = LiveStreams::new(Ok(Arc::new(Redactor::new().unwrap())), None);
        for stream in 0..MAX_LIVE_STREAMS + 10 {
            live.push(format!("s{stream}"), None, "bob@exa", false)
                .unwrap();
        }
        assert_eq!(live.open(), MAX_LIVE_STREAMS);
    }

    #[test]
    fn a_configuration_error_withholds_every_delta() {
        let error = RedactionError::Config {
            setting: "test",
            message: "broken".into(),
        };
        let live = LiveStreams::new(Err(error), None);
        assert!(live.push("m1".into(), None, "hello", false).is_err());
    }
}
