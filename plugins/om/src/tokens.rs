//! Token counting: exact counts with the `o200k_base` encoding, cached per message so each
//! message is counted once, and a cheap estimate where exactness is not needed.
//!
//! The encoder is [`bpe_openai`]'s, a linear-time byte-pair encoder whose counts equal
//! tiktoken's (`encode_ordinary(text).len()`; the crate's tests check it against tiktoken-rs,
//! and so do ours, on generated text in many scripts and on arbitrary strings). tiktoken-rs
//! counted at ~4 MB/s here; this encoder counts without building the token list, at tens of
//! MB/s (`cargo run --release -p harness-bench -- om`, `count_mb_per_s`).
//!
//! Even so, a message's tokens are first *estimated* from its size the moment it is seen
//! (`bytes / 3.5`, which errs high for prose and is close for code and JSON), so that no model
//! step waits on counting: only once the pending messages reach half a buffering interval are
//! they counted exactly, on a background thread, and each exact count replaces its estimate
//! when it is ready. Threshold checks use whatever is known; an observation's recorded figures
//! are counted exactly first.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

use bpe_openai::Tokenizer;
use harness_tags::KernelMessage;

use crate::pretokenize::{ascii_pieces, segments};

/// Tokens added per message for its role and framing (the chat formats spend about this).
const MESSAGE_OVERHEAD: u64 = 4;

/// The exact counter: the `o200k_base` encoding, loaded once per process.
pub struct TokenCounter {
    encoding: OnceLock<&'static Tokenizer>,
}

impl std::fmt::Debug for TokenCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenCounter")
            .field("loaded", &self.encoding.get().is_some())
            .finish()
    }
}

impl TokenCounter {
    /// The process's counter (the encoding's tables are unpacked on first use, which takes
    /// some 100 ms and some MB).
    pub fn global() -> &'static TokenCounter {
        static COUNTER: TokenCounter = TokenCounter {
            encoding: OnceLock::new(),
        };
        &COUNTER
    }

    /// Loads the encoding on a background thread, so that the first count does not wait.
    pub fn preload(&'static self) {
        if self.encoding.get().is_none() {
            let _ = std::thread::Builder::new()
                .name("om-token-encoding".into())
                .spawn(move || {
                    self.encoding();
                });
        }
    }

    fn encoding(&self) -> &'static Tokenizer {
        self.encoding.get_or_init(bpe_openai::o200k_base)
    }

    /// The exact number of tokens in `text`: what tiktoken's `o200k_base` encodes it to.
    pub fn count(&self, text: &str) -> u64 {
        let tokenizer = self.encoding();
        PIECE_TOKENS.with_borrow_mut(|known| {
            let mut tokens = 0;
            for segment in segments(text) {
                if segment.is_ascii() {
                    for piece in ascii_pieces(segment) {
                        tokens += known.tokens(piece, tokenizer);
                    }
                } else {
                    for piece in tokenizer.split(segment) {
                        tokens += known.tokens(piece, tokenizer);
                    }
                }
            }
            tokens
        })
    }

    /// The exact number of tokens of a message as a model receives it.
    pub fn count_message(&self, message: &KernelMessage) -> u64 {
        MESSAGE_OVERHEAD + self.count(&message_text(message))
    }
}

thread_local! {
    /// The tokens of short pieces already encoded on this thread: text repeats its words, and
    /// a lookup costs a fraction of an encoding.
    static PIECE_TOKENS: RefCell<PieceTokens> = RefCell::new(PieceTokens::default());
}

/// Token counts by piece, for pieces of at most `PieceTokens::MAX_PIECE` bytes; emptied when
/// it holds `PieceTokens::MAX_ENTRIES`, so that it stays a few MB.
#[derive(Default)]
struct PieceTokens {
    counts: HashMap<Box<str>, u64>,
}

impl PieceTokens {
    const MAX_PIECE: usize = 24;
    const MAX_ENTRIES: usize = 65_536;

    fn tokens(&mut self, piece: &str, tokenizer: &Tokenizer) -> u64 {
        if piece.len() > Self::MAX_PIECE {
            return tokenizer.bpe.count(piece.as_bytes()) as u64;
        }
        if let Some(&tokens) = self.counts.get(piece) {
            return tokens;
        }
        let tokens = tokenizer.bpe.count(piece.as_bytes()) as u64;
        if self.counts.len() >= Self::MAX_ENTRIES {
            self.counts.clear();
        }
        self.counts.insert(piece.into(), tokens);
        tokens
    }
}

/// The estimated tokens of `bytes` bytes of text: `bytes / 3.5`, rounded up.
pub fn estimate_bytes(bytes: usize) -> u64 {
    (bytes as u64 * 2).div_ceil(7)
}

/// The estimated tokens of a message.
pub fn estimate_message(message: &KernelMessage) -> u64 {
    MESSAGE_OVERHEAD + estimate_bytes(message_bytes(message))
}

/// The text of a message a model is charged for: its content, tool calls and reasoning.
pub fn message_text(message: &KernelMessage) -> String {
    match message {
        KernelMessage::Assistant {
            content,
            tool_calls,
            thinking,
        } => {
            let mut text = String::with_capacity(message_bytes(message));
            if let Some(thinking) = thinking {
                text.push_str(&thinking.text);
                text.push('\n');
            }
            text.push_str(content);
            for call in tool_calls {
                text.push('\n');
                text.push_str(&call.name);
                text.push(' ');
                text.push_str(&call.arguments.to_string());
            }
            text
        }
        KernelMessage::ToolResult {
            tool_name, content, ..
        } => format!("{tool_name}\n{content}"),
        other => other.content().to_owned(),
    }
}

fn message_bytes(message: &KernelMessage) -> usize {
    match message {
        KernelMessage::Assistant {
            content,
            tool_calls,
            thinking,
        } => {
            let calls: usize = tool_calls
                .iter()
                .map(|c| c.name.len() + 2 + json_size(&c.arguments))
                .sum();
            content.len() + calls + thinking.as_ref().map_or(0, |t| t.text.len() + 1)
        }
        KernelMessage::ToolResult {
            tool_name, content, ..
        } => tool_name.len() + 1 + content.len(),
        other => other.content().len(),
    }
}

/// The size of a JSON value's compact text, without building it.
fn json_size(value: &serde_json::Value) -> usize {
    use serde_json::Value;
    match value {
        Value::Null => 4,
        Value::Bool(b) => 4 + usize::from(!b),
        Value::Number(n) => n.to_string().len(),
        Value::String(s) => s.len() + 2,
        Value::Array(items) => {
            2 + items.iter().map(json_size).sum::<usize>() + items.len().saturating_sub(1)
        }
        Value::Object(map) => {
            let entries: usize = map.iter().map(|(k, v)| k.len() + 3 + json_size(v)).sum();
            2 + entries + map.len().saturating_sub(1)
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Slot {
    bytes: usize,
    tokens: u64,
    exact: bool,
    /// An exact count was asked of the counting thread.
    queued: bool,
}

/// The token counts of one thread's messages by position (threads only grow, so a position's
/// message never changes; a different size at a position means a different conversation and
/// resets the counts from there).
#[derive(Debug, Default)]
pub(crate) struct TokenCache {
    slots: Mutex<Vec<Slot>>,
}

/// A message to count exactly, off the model step's path.
struct Job {
    cache: Weak<TokenCache>,
    position: usize,
    bytes: usize,
    text: String,
}

fn worker() -> &'static Mutex<Sender<Job>> {
    static WORKER: OnceLock<Mutex<Sender<Job>>> = OnceLock::new();
    WORKER.get_or_init(|| {
        let (jobs, queue) = mpsc::channel::<Job>();
        let spawned = std::thread::Builder::new()
            .name("om-token-counter".into())
            .spawn(move || {
                let counter = TokenCounter::global();
                while let Ok(job) = queue.recv() {
                    let Some(cache) = job.cache.upgrade() else {
                        continue;
                    };
                    let tokens = MESSAGE_OVERHEAD + counter.count(&job.text);
                    cache.settle(job.position, job.bytes, tokens);
                }
            });
        if let Err(error) = spawned {
            tracing::warn!(%error, "no token-counting thread; counts stay estimates");
        }
        Mutex::new(jobs)
    })
}

impl TokenCache {
    fn slots(&self) -> MutexGuard<'_, Vec<Slot>> {
        // Each critical section writes whole slots: a poisoned lock still holds valid counts.
        self.slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes note of `messages` (a thread's conversation, oldest first): new or changed
    /// positions get an estimate. Exact counts come with [`TokenCache::refine`], once a
    /// decision could depend on them.
    pub(crate) fn track(&self, messages: &[KernelMessage]) {
        let mut slots = self.slots();
        let known = slots
            .iter()
            .zip(messages)
            .position(|(slot, message)| slot.bytes != message_bytes(message))
            .unwrap_or(slots.len().min(messages.len()));
        slots.truncate(known);
        for message in &messages[known..] {
            let bytes = message_bytes(message);
            slots.push(Slot {
                bytes,
                tokens: MESSAGE_OVERHEAD + estimate_bytes(bytes),
                exact: false,
                queued: false,
            });
        }
    }

    /// Has the messages at `range` counted exactly in the background where only estimates
    /// are known (each message once).
    pub(crate) fn refine(
        self: &Arc<Self>,
        messages: &[KernelMessage],
        range: std::ops::Range<usize>,
    ) {
        let mut jobs = Vec::new();
        {
            let mut slots = self.slots();
            let end = range.end.min(slots.len()).min(messages.len());
            for position in range.start.min(end)..end {
                let slot = &mut slots[position];
                if slot.exact || slot.queued {
                    continue;
                }
                slot.queued = true;
                jobs.push(Job {
                    cache: Arc::downgrade(self),
                    position,
                    bytes: slot.bytes,
                    text: message_text(&messages[position]),
                });
            }
        }
        if !jobs.is_empty() {
            let sender = worker()
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for job in jobs {
                // Without the worker the estimate stays; nothing else depends on the count.
                let _ = sender.send(job);
            }
        }
    }

    /// Counts the messages at `range` of `messages` exactly now where only estimates are known
    /// (before an observation is recorded, so that the record's figures are exact).
    pub(crate) fn settle_range(&self, messages: &[KernelMessage], range: std::ops::Range<usize>) {
        let end = range.end.min(messages.len());
        let pending: Vec<(usize, usize)> = self
            .slots()
            .iter()
            .enumerate()
            .take(end)
            .skip(range.start)
            .filter(|(_, slot)| !slot.exact)
            .map(|(position, slot)| (position, slot.bytes))
            .collect();
        for (position, bytes) in pending {
            let tokens = TokenCounter::global().count_message(&messages[position]);
            self.settle(position, bytes, tokens);
        }
    }

    fn settle(&self, position: usize, bytes: usize, tokens: u64) {
        if let Some(slot) = self
            .slots()
            .get_mut(position)
            .filter(|slot| slot.bytes == bytes)
        {
            *slot = Slot {
                bytes,
                tokens,
                exact: true,
                queued: false,
            };
        }
    }

    /// Tokens of the messages at `range` (what is known: exact or estimated).
    pub(crate) fn sum(&self, range: std::ops::Range<usize>) -> u64 {
        let slots = self.slots();
        let end = range.end.min(slots.len());
        slots
            .get(range.start.min(end)..end)
            .map_or(0, |s| s.iter().map(|slot| slot.tokens).sum())
    }

    /// The tokens of each message at `range`.
    pub(crate) fn each(&self, range: std::ops::Range<usize>) -> Vec<u64> {
        let slots = self.slots();
        let end = range.end.min(slots.len());
        slots
            .get(range.start.min(end)..end)
            .map_or_else(Vec::new, |s| s.iter().map(|slot| slot.tokens).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness_tags::ToolCall;
    use serde_json::json;

    #[test]
    fn exact_counts_use_o200k() {
        let counter = TokenCounter::global();
        assert_eq!(counter.count("hello world"), 2);
        assert_eq!(counter.count(""), 0);
        assert_eq!(
            counter.count_message(&KernelMessage::user("hello world")),
            2 + MESSAGE_OVERHEAD
        );
    }

    #[test]
    fn the_size_of_a_message_matches_its_text() {
        let message = KernelMessage::Assistant {
            content: "Reading it.".into(),
            tool_calls: vec![ToolCall {
                id: "c1".into(),
                name: "read_file".into(),
                arguments: json!({"path": "src/lib.rs", "limit": 20, "all": false, "tags": ["a", null]}),
            }],
            thinking: None,
        };
        assert_eq!(message_bytes(&message), message_text(&message).len());
        let result = KernelMessage::ToolResult {
            tool_call_id: "c1".into(),
            tool_name: "read_file".into(),
            content: "fn main() {}".into(),
            is_error: false,
        };
        assert_eq!(message_bytes(&result), message_text(&result).len());
    }

    #[test]
    fn estimates_are_close_to_exact_counts_for_prose_and_code() {
        let samples = [
            "Please look at the failing build and tell me which trait bound is missing; the \
             compiler points at the iterator adaptor in the second module.",
            "fn main() {\n    let total: u32 = items.iter().map(|x| x * 2).sum();\n    println!(\"{total}\");\n}\n",
            r#"{"path": "src/module_12.rs", "limit": 200, "offset": 40, "recursive": true}"#,
        ];
        for text in samples {
            let exact = TokenCounter::global().count(text) as f64;
            let estimate = estimate_bytes(text.len()) as f64;
            assert!(
                estimate >= exact * 0.7 && estimate <= exact * 1.5,
                "{exact} vs {estimate}: {text}"
            );
        }
    }

    #[test]
    fn tracking_estimates_until_a_range_is_settled() {
        let cache = Arc::new(TokenCache::default());
        let messages = vec![KernelMessage::user("hello world, hello again")];
        cache.track(&messages);
        assert_eq!(cache.sum(0..1), MESSAGE_OVERHEAD + estimate_bytes(24));
        cache.settle_range(&messages, 0..1);
        assert_eq!(
            cache.sum(0..1),
            TokenCounter::global().count_message(&messages[0])
        );
    }

    #[test]
    fn the_cache_counts_each_position_once_and_resets_on_a_different_conversation() {
        let cache = Arc::new(TokenCache::default());
        let first = vec![
            KernelMessage::user("hello world"),
            KernelMessage::user("again"),
        ];
        cache.track(&first);
        cache.settle_range(&first, 0..first.len());
        assert_eq!(cache.sum(0..2), 2 + 1 + 2 * MESSAGE_OVERHEAD);
        // The same prefix plus one: only the new message is added.
        let mut second = first.clone();
        second.push(KernelMessage::user("three more words"));
        cache.track(&second);
        assert_eq!(cache.each(0..2), vec![6, 5]);
        // A different message at position 1: counts from there are redone.
        let other = vec![
            KernelMessage::user("hello world"),
            KernelMessage::user("something much longer than before"),
        ];
        cache.track(&other);
        cache.settle_range(&other, 0..other.len());
        assert_eq!(
            cache.each(0..2)[1],
            TokenCounter::global().count_message(&other[1])
        );
        assert_eq!(cache.sum(0..10), cache.sum(0..2));
    }
}
