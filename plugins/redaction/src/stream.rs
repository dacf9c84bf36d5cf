//! Streaming redaction of text deltas with a look-back window.
//!
//! A model or a tool streams text in deltas; a secret can be split across two of them. The
//! [`StreamRedactor`] emits each delta's text as soon as no entity can still be growing at
//! its end, and holds back only the trailing run of characters an entity could continue
//! (`bob@exa` of `bob@example.com`, `4111 1111` of a card number): prose and JSON flow
//! through at once. Nothing is held back longer than the window: at most `window` bytes of
//! input are pending at any time. Already-emitted text stays as look-back context, so a value
//! whose keyword came in an earlier delta (`password: ` then `hunter2`) is still caught.
//!
//! A private key block is handled apart: once its `-----BEGIN ... PRIVATE KEY-----` header
//! is complete, the body is swallowed (not delayed: never emitted) until the `-----END`
//! line, then replaced as one `PRIVATE_KEY` finding.
//!
//! Entities longer than the window (other than key blocks) are caught only when they arrive
//! within one window, and the words before a phone number count when they are within the
//! 256 bytes of look-back (a CSV column header further up does not).

use std::sync::Arc;

use crate::detect::Finding;
use crate::detect::normalize::{Fold, fold};
use crate::entity::Entity;
use crate::error::RedactionError;
use crate::operator::Operator;
use crate::redactor::Redactor;

/// The default window: the most bytes held back, 1 KiB.
pub const DEFAULT_WINDOW: usize = 1024;

/// Raw text kept as look-back context after it was emitted.
const CONTEXT: usize = 256;

/// The most of a private key block kept for its operator (longer blocks keep their head).
const BLOCK_MAX: usize = 64 << 10;

/// Redacts a stream of text deltas.
///
/// ```
/// use harness_redaction::Redactor;
///
/// let redactor = Redactor::new()?;
/// let mut stream = redactor.stream(None);
/// let mut out = String::new();
/// for delta in ["write to bob@exa", "mple.com today", "."] {
///     out += &stream.push(delta)?;
/// }
/// out += &stream.finish()?;
/// assert_eq!(out, "write to <EMAIL_ADDRESS> today.");
/// # Ok::<(), harness_redaction::RedactionError>(())
/// ```
#[derive(Debug)]
pub struct StreamRedactor<'r> {
    redactor: Source<'r>,
    thread: Option<String>,
    operator: Option<Operator>,
    window: usize,
    /// Raw text already emitted, kept for look-back.
    context: String,
    /// Raw text not yet emitted.
    pending: String,
    /// Inside a private key block: its raw text so far.
    block: Option<String>,
}

/// The redactor a stream uses: borrowed, or shared so that the stream can be kept anywhere.
#[derive(Debug)]
enum Source<'r> {
    Borrowed(&'r Redactor),
    Shared(Arc<Redactor>),
}

impl std::ops::Deref for Source<'_> {
    type Target = Redactor;

    fn deref(&self) -> &Redactor {
        match self {
            Source::Borrowed(redactor) => redactor,
            Source::Shared(redactor) => redactor,
        }
    }
}

impl Redactor {
    /// A streaming redactor over this redactor (see [`StreamRedactor`]).
    pub fn stream(&self, thread: Option<&str>) -> StreamRedactor<'_> {
        StreamRedactor::new(Source::Borrowed(self), thread)
    }
}

impl StreamRedactor<'static> {
    /// A streaming redactor that owns a share of `redactor`, to keep between deltas that
    /// arrive in different calls (the plugin keeps one per live stream).
    pub fn shared(redactor: Arc<Redactor>, thread: Option<&str>) -> Self {
        StreamRedactor::new(Source::Shared(redactor), thread)
    }
}

impl<'r> StreamRedactor<'r> {
    fn new(redactor: Source<'r>, thread: Option<&str>) -> Self {
        StreamRedactor {
            redactor,
            thread: thread.map(str::to_owned),
            operator: None,
            window: DEFAULT_WINDOW,
            context: String::new(),
            pending: String::new(),
            block: None,
        }
    }

    /// Sets the window: the most bytes held back (at least 64; default [`DEFAULT_WINDOW`]).
    pub fn window(mut self, bytes: usize) -> Self {
        self.window = bytes.max(64);
        self
    }

    /// Uses `operator` for every finding instead of the redactor's operators.
    pub fn operator(mut self, operator: Operator) -> Self {
        self.operator = Some(operator);
        self
    }

    /// Adds a delta; returns the redacted text that can be shown now.
    pub fn push(&mut self, delta: &str) -> Result<String, RedactionError> {
        self.pending.push_str(delta);
        self.drain(false)
    }

    /// Ends the stream; returns the rest of the redacted text.
    pub fn finish(mut self) -> Result<String, RedactionError> {
        self.drain(true)
    }

    /// Bytes received but not yet emitted (at most the window, key blocks aside).
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    fn drain(&mut self, last: bool) -> Result<String, RedactionError> {
        let mut out = String::new();
        loop {
            if let Some(block) = self.block.as_mut() {
                let searched = block.len().saturating_sub(64);
                block.push_str(&self.pending);
                self.pending.clear();
                match pem_end(block, searched) {
                    Some(end) => {
                        let rest = block.split_off(end);
                        let value = std::mem::take(block);
                        self.block = None;
                        self.render_block(&mut out, &value)?;
                        self.pending = rest;
                        self.context.clear();
                        continue;
                    }
                    None if last => {
                        let value = std::mem::take(block);
                        self.block = None;
                        self.render_block(&mut out, &value)?;
                        return Ok(out);
                    }
                    None => {
                        if block.len() > BLOCK_MAX {
                            // Keep the head for the operator and the tail to find the end.
                            let tail = block.split_off(block.len() - 64);
                            block.truncate(floor_boundary(block, BLOCK_MAX - 64));
                            block.push_str(&tail);
                        }
                        return Ok(out);
                    }
                }
            }

            if !last && let Some(header) = pem_open(&self.pending) {
                let head = self.pending[..header].to_owned();
                self.emit(&mut out, &head, head.len())?;
                self.block = Some(self.pending.split_off(header));
                self.pending.clear();
                continue;
            }
            let pending = std::mem::take(&mut self.pending);
            let hold = self.emit(&mut out, &pending, if last { pending.len() } else { 0 })?;
            self.pending = pending[hold..].to_owned();
            return Ok(out);
        }
    }

    /// Emits the safe part of `pending` (all of it from `at_least` on) and returns how many
    /// bytes were emitted.
    fn emit(
        &mut self,
        out: &mut String,
        pending: &str,
        at_least: usize,
    ) -> Result<usize, RedactionError> {
        if pending.is_empty() {
            return Ok(0);
        }
        let base = self.context.len();
        let mut text = String::with_capacity(base + pending.len());
        text.push_str(&self.context);
        text.push_str(pending);
        self.redactor.check_size(text.len())?;
        let findings = self.redactor.find(&text);

        let min_hold = ceil_boundary(pending, pending.len().saturating_sub(self.window));
        let mut hold = safe_len(pending).max(min_hold).max(at_least);
        hold = hold.min(open_header(pending).unwrap_or(usize::MAX).max(min_hold));
        for f in &findings {
            let (s, e) = (
                f.start as isize - base as isize,
                f.end as isize - base as isize,
            );
            let h = hold as isize;
            if e > 0 && s < h && h < e {
                hold = if s >= min_hold as isize {
                    s.max(0) as usize
                } else {
                    e as usize
                };
                break;
            }
        }
        let ready = &pending[..hold];
        let local: Vec<Finding> = findings
            .iter()
            .filter_map(|f| {
                let s = f.start.saturating_sub(base);
                let e = f.end.checked_sub(base)?;
                (e > 0 && e <= hold && ready.is_char_boundary(s)).then(|| Finding {
                    start: s,
                    end: e,
                    ..f.clone()
                })
            })
            .collect();
        out.push_str(&self.redactor.apply(
            ready,
            &local,
            self.thread.as_deref(),
            self.operator.as_ref(),
        )?);

        self.context.push_str(ready);
        if self.context.len() > CONTEXT {
            let cut = ceil_boundary(&self.context, self.context.len() - CONTEXT);
            // Start the context at a whitespace so the cut does not invent a word start.
            let cut = self.context[cut..]
                .find(char::is_whitespace)
                .map_or(self.context.len(), |i| cut + i);
            self.context.drain(..cut);
        }
        Ok(hold)
    }

    fn render_block(&self, out: &mut String, value: &str) -> Result<(), RedactionError> {
        let entity = Entity::PrivateKey;
        let op = self
            .operator
            .as_ref()
            .unwrap_or_else(|| self.redactor.operator_for(&entity));
        self.redactor
            .render(out, op, &entity, value, self.thread.as_deref())
    }
}

/// Bytes an entity may contain; a trailing run of them may still grow into one.
fn entity_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric()
        || matches!(
            byte,
            b'@' | b'.'
                | b'_'
                | b'%'
                | b'+'
                | b'-'
                | b':'
                | b'/'
                | b'='
                | b'~'
                | b'!'
                | b'#'
                | b'$'
                | b'^'
                | b'&'
                | b'*'
                | b'?'
                | b'('
                | b')'
        )
}

/// The length of `pending` without its trailing run of characters an entity could continue
/// (spaces count inside digit groups: `4111 1111 `, `(555) 123`), judged on the normalized
/// view detection uses: a zero-width character, a soft hyphen, a fullwidth letter or a
/// non-breaking space after a digit may be inside an entity too.
fn safe_len(pending: &str) -> usize {
    let folded = |c: char| match fold(c) {
        Fold::Drop => Some(None),
        Fold::Ascii(b) => Some(Some(b)),
        Fold::Keep => c.is_ascii().then_some(Some(c as u8)),
    };
    let mut safe = pending.len();
    let mut chars = pending.char_indices().rev().peekable();
    while let Some((at, c)) = chars.next() {
        let Some(byte) = folded(c) else {
            break;
        };
        let continues = match byte {
            None => true,
            Some(b' ') => chars
                .peek()
                .and_then(|&(_, left)| folded(left).flatten())
                .is_some_and(|left| left.is_ascii_digit() || left == b')'),
            Some(b) => entity_byte(b),
        };
        if !continues {
            break;
        }
        safe = at;
    }
    safe
}

/// The start of a `-----BEGIN` header line still being written, if any.
fn open_header(pending: &str) -> Option<usize> {
    let start = pending.rfind("-----BEGIN")?;
    let after = &pending[start + 10..];
    let closed = after.contains("-----") || after.contains('\n') || after.len() > 64;
    (!closed).then_some(start)
}

/// The start of a complete private key header with no end line after it.
fn pem_open(pending: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = pending[from..].find("-----BEGIN ") {
        let start = from + i;
        let label_start = start + 11;
        if let Some(close) = pending[label_start..].find("-----") {
            let label = &pending[label_start..label_start + close];
            let private = label.ends_with("PRIVATE KEY") || label.ends_with("PRIVATE KEY BLOCK");
            if private && close <= 48 {
                let after = label_start + close + 5;
                return pem_end(&pending[after..], 0).is_none().then_some(start);
            }
        }
        from = label_start;
    }
    None
}

/// The end of the first `-----END ... PRIVATE KEY-----` line at or after `from`.
fn pem_end(block: &str, from: usize) -> Option<usize> {
    let from = floor_boundary(block, from);
    let mut search = from;
    while let Some(i) = block[search..].find("-----END ") {
        let label_start = search + i + 9;
        if let Some(close) = block[label_start..].find("-----") {
            let label = &block[label_start..label_start + close];
            if close <= 48
                && (label.ends_with("PRIVATE KEY") || label.ends_with("PRIVATE KEY BLOCK"))
            {
                return Some(label_start + close + 5);
            }
        }
        search = label_start;
    }
    None
}

fn floor_boundary(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn ceil_boundary(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}
