//! [`SqliteThreadLock`]: one operating-system file lock per thread, across processes.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;

use crate::{LockError, ThreadLock};

/// A [`ThreadLock`] that works across processes: one lock file per thread in a directory
/// beside the database (`<db>.locks/`), held with an operating-system file lock
/// ([`File::try_lock`]) for as long as the thread is held.
///
/// The operating system releases the lock when the holder's process dies, however it dies
/// (`SIGKILL` included), so a crashed harness never leaves a thread locked. The holder
/// writes its process id into the file, and [`LockError::Held`] reports it.
///
/// Each harness takes its own `SqliteThreadLock`: two of them exclude each other even in
/// one process. One that already holds a thread acquires it again; dropping it releases
/// everything it holds. Lock files stay in the directory after release (removing them
/// would race with a process opening them); they are empty of meaning once unlocked.
///
/// File names are the thread id with every character other than ASCII letters, digits,
/// `-` and `_` replaced by `_` (at most 64 of them), then a hash of the whole id, so that
/// distinct ids never share a file, even on case-insensitive file systems.
#[derive(Debug)]
pub struct SqliteThreadLock {
    dir: PathBuf,
    held: Mutex<HashMap<String, File>>,
}

impl SqliteThreadLock {
    /// A lock for the database at `db_path`, with its lock files in `<db_path>.locks/`.
    pub fn for_database(db_path: impl AsRef<Path>) -> Self {
        let mut dir = db_path.as_ref().as_os_str().to_owned();
        dir.push(".locks");
        Self::in_directory(PathBuf::from(dir))
    }

    /// A lock with its lock files in `dir` (created when first needed).
    pub fn in_directory(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            held: Mutex::new(HashMap::new()),
        }
    }

    /// The directory of the lock files.
    pub fn directory(&self) -> &Path {
        &self.dir
    }

    fn held(&self) -> MutexGuard<'_, HashMap<String, File>> {
        // The map is only inserted into and removed from: a poisoned lock guards a valid map.
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The name of a thread's lock file: a readable, safe part and a hash of the whole id.
pub(super) fn lock_file_name(thread_id: &str) -> String {
    let readable: String = thread_id
        .chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{readable}-{:016x}.lock", fnv1a(thread_id.as_bytes()))
}

/// 64-bit FNV-1a: stable across builds and platforms, unlike the standard hasher.
pub(super) fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// Who holds a lock, from its file: `process <pid>`, marked when it is this process.
pub(super) fn read_holder(mut file: &File) -> Option<String> {
    let mut text = String::new();
    file.read_to_string(&mut text).ok()?;
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    if text == holder_line().trim() {
        return Some(format!("{text}, this process"));
    }
    Some(text.to_owned())
}

pub(super) fn holder_line() -> String {
    format!("process {}\n", std::process::id())
}

#[async_trait]
impl ThreadLock for SqliteThreadLock {
    async fn acquire(&self, thread_id: &str) -> Result<(), LockError> {
        let mut held = self.held();
        if held.contains_key(thread_id) {
            return Ok(());
        }
        let path = self.dir.join(lock_file_name(thread_id));
        let failed = |what: &str, error: std::io::Error| LockError::Failed {
            thread_id: thread_id.to_owned(),
            reason: format!("{what} `{}`: {error}", path.display()),
        };
        std::fs::create_dir_all(&self.dir)
            .map_err(|error| failed("cannot create the lock directory for", error))?;
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|error| failed("cannot open the lock file", error))?;
        match file.try_lock() {
            Ok(()) => {
                // Who holds it, for the other side's error message; the lock stands even
                // if this cannot be written.
                let _ = file
                    .set_len(0)
                    .and_then(|()| file.write_all(holder_line().as_bytes()));
                held.insert(thread_id.to_owned(), file);
                Ok(())
            }
            Err(std::fs::TryLockError::WouldBlock) => Err(LockError::Held {
                thread_id: thread_id.to_owned(),
                holder: read_holder(&file),
            }),
            Err(std::fs::TryLockError::Error(error)) => {
                Err(failed("cannot lock the lock file", error))
            }
        }
    }

    async fn release(&self, thread_id: &str) -> Result<(), LockError> {
        // Closing the file releases the operating-system lock.
        self.held().remove(thread_id);
        Ok(())
    }
}
