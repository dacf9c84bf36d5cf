//! The pseudonym vault: per thread, which pseudonym stands for which real value.
//!
//! The `Pseudonym` operator stores each value it replaces here. When the model passes a
//! pseudonym back in a tool call, the plugin's `tool.call` handler restores the real value
//! so the tool acts on data the model never saw. Vaults live in memory, per thread; the
//! plugin drops a thread's vault on `thread.deleted` and copies it on `thread.cloned`.
//!
//! **Which thread.** The plugin keys the vault by the thread a run's records belong with
//! ([`BaseCtx::root_thread_id`](harness_tags::BaseCtx::root_thread_id)): a subagent, fresh or
//! forked, uses its parent thread's vault, so what it saw resolves in the parent's tool
//! calls, never in another thread's, and goes when the parent is deleted. Text redacted
//! outside any thread shares one vault, under the empty key.
//!
//! **The cap.** A thread's vault holds at most `vault_capacity` values: 100,000 unless set
//! with [`RedactorBuilder::vault_capacity`](crate::RedactorBuilder::vault_capacity) or
//! `vaultCapacity` in a [`RedactionConfig`](crate::RedactionConfig). That bounds what one
//! thread can make the process keep (each value is held twice, with its token: some 20-30 MB
//! for 100,000 short values). A value already in the vault keeps its pseudonym past the cap;
//! a new one fails with [`RedactionError::VaultFull`], which names the thread and the cap.
//! The plugin's handlers are fail-closed, so the text holding that value is withheld (the
//! model is told a safety handler could not process it, and the harness publishes an `error`
//! event with the message): never the real value, never a token that cannot be restored.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::entity::Entity;
use crate::error::RedactionError;

#[derive(Clone, Debug, Default)]
struct ThreadVault {
    /// Pseudonym (`<EMAIL_ADDRESS_7f3a1c>`) -> real value.
    by_token: HashMap<String, String>,
    /// (entity, real value) -> pseudonym.
    by_value: HashMap<(Entity, String), String>,
}

/// Pseudonyms and the values they stand for, per thread.
#[derive(Debug)]
pub struct Vault {
    threads: Mutex<HashMap<String, ThreadVault>>,
    capacity: usize,
}

impl Vault {
    /// A vault that holds at most `capacity` values per thread.
    pub fn new(capacity: usize) -> Vault {
        Vault {
            threads: Mutex::new(HashMap::new()),
            capacity,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, ThreadVault>> {
        // Nothing panics while the lock is held; a poisoned lock still holds consistent maps.
        self.threads.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The pseudonym of `value` in `thread`: the existing one, or a new one made by `derive`
    /// (called with a growing number of hex digits until the token is unique in the thread).
    pub(crate) fn pseudonym(
        &self,
        thread: &str,
        entity: &Entity,
        value: &str,
        derive: impl Fn(usize) -> String,
        min_len: usize,
    ) -> Result<String, RedactionError> {
        let mut threads = self.lock();
        let vault = threads.entry(thread.to_owned()).or_default();
        let key = (entity.clone(), value.to_owned());
        if let Some(token) = vault.by_value.get(&key) {
            return Ok(token.clone());
        }
        if vault.by_value.len() >= self.capacity {
            return Err(RedactionError::VaultFull {
                thread: thread.to_owned(),
                max: self.capacity,
            });
        }
        let mut len = min_len;
        let token = loop {
            let token = derive(len);
            if !vault.by_token.contains_key(&token) || len >= 64 {
                break token;
            }
            len += 2;
        };
        vault.by_token.insert(token.clone(), value.to_owned());
        vault.by_value.insert(key, token.clone());
        Ok(token)
    }

    /// The real value behind a pseudonym in `thread`.
    pub fn lookup(&self, thread: &str, token: &str) -> Option<String> {
        self.lock()
            .get(thread)
            .and_then(|vault| vault.by_token.get(token).cloned())
    }

    /// `text` with every pseudonym of `thread` replaced by its real value; `None` if it holds
    /// none.
    pub fn restore(&self, thread: &str, text: &str) -> Option<String> {
        if !text.contains('<') {
            return None;
        }
        let threads = self.lock();
        let vault = threads.get(thread)?;
        let mut out = String::new();
        let mut copied = 0;
        let mut search = 0;
        while let Some(open) = text[search..].find('<').map(|i| search + i) {
            let Some(close) = text[open..]
                .bytes()
                .take(96)
                .position(|b| b == b'>')
                .map(|i| open + i)
            else {
                search = open + 1;
                continue;
            };
            match vault.by_token.get(&text[open..=close]) {
                Some(value) => {
                    out.push_str(&text[copied..open]);
                    out.push_str(value);
                    copied = close + 1;
                    search = close + 1;
                }
                None => search = open + 1,
            }
        }
        if copied == 0 {
            return None;
        }
        out.push_str(&text[copied..]);
        Some(out)
    }

    /// How many values the vault holds for `thread`.
    pub fn len(&self, thread: &str) -> usize {
        self.lock().get(thread).map_or(0, |v| v.by_token.len())
    }

    /// True if no thread holds a value.
    pub fn is_empty(&self) -> bool {
        self.lock().values().all(|v| v.by_token.is_empty())
    }

    /// Drops the vault of `thread`.
    pub fn forget(&self, thread: &str) {
        self.lock().remove(thread);
    }

    /// Gives thread `to` a copy of the vault of thread `from` (for cloned threads).
    pub fn copy(&self, from: &str, to: &str) {
        let mut threads = self.lock();
        if let Some(source) = threads.get(from).cloned() {
            threads.insert(to.to_owned(), source);
        }
    }
}
