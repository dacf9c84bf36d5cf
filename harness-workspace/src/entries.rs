//! The workspace as files for an API to serve: entries with their metadata, whole files read
//! and written as bytes, deletion and new directories. Every path is resolved beneath the
//! root when it is opened, exactly as for the tools.

use std::io::{Read, Write};
use std::time::UNIX_EPOCH;

use cap_std::fs::{Metadata, OpenOptions};
use harness_core::tool::ToolError;

use crate::{Workspace, never_block, not_regular};

/// The most entries [`Workspace::entries`] returns.
const MAX_ENTRIES: usize = 10_000;

/// A file or directory of the workspace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Its path from the root, with `/` between components.
    pub path: String,
    /// Its last component.
    pub name: String,
    /// True for a directory.
    pub is_dir: bool,
    /// Its size in bytes (0 for a directory).
    pub size: u64,
    /// When it last changed, Unix milliseconds, if the system says.
    pub modified_ms: Option<i64>,
}

/// Whether a write created the file or replaced one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Written {
    /// The file did not exist.
    Created,
    /// An existing file was replaced.
    Replaced,
}

fn modified(metadata: &Metadata) -> Option<i64> {
    let time = metadata.modified().ok()?.into_std();
    let elapsed = time.duration_since(UNIX_EPOCH).ok()?;
    i64::try_from(elapsed.as_millis()).ok()
}

impl Workspace {
    fn entry_of(&self, relative: &std::path::Path, metadata: &Metadata) -> Entry {
        let path = relative
            .components()
            .map(|component| component.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/");
        let name = relative
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        Entry {
            path,
            name,
            is_dir: metadata.is_dir(),
            size: if metadata.is_dir() { 0 } else { metadata.len() },
            modified_ms: modified(metadata),
        }
    }

    /// The file or directory at `asked`.
    pub fn entry(&self, asked: &str) -> Result<Entry, ToolError> {
        let relative = self.relative(asked)?;
        let metadata = self
            .dir
            .metadata(&relative)
            .map_err(|error| self.refused(asked, &error))?;
        Ok(self.entry_of(&relative, &metadata))
    }

    /// The entries of the directory `asked`, by name (links are listed as what they are, not
    /// followed); at most 10,000.
    pub fn entries(&self, asked: &str) -> Result<Vec<Entry>, ToolError> {
        let relative = self.relative(asked)?;
        let failed = |error: std::io::Error| self.refused(asked, &error);
        let mut entries = Vec::new();
        for entry in self.dir.read_dir(&relative).map_err(failed)? {
            let Ok(entry) = entry else { continue };
            if entries.len() == MAX_ENTRIES {
                break;
            }
            let Ok(metadata) = entry.metadata() else {
                continue;
            };
            let path = relative.join(entry.file_name());
            let path = path.strip_prefix(".").unwrap_or(&path);
            entries.push(self.entry_of(path, &metadata));
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(entries)
    }

    /// A regular file's bytes; refused past `limit` bytes.
    pub fn read_bytes(&self, asked: &str, limit: u64) -> Result<Vec<u8>, ToolError> {
        let (file, size) = self.open_regular(asked)?;
        if size > limit {
            return Err(ToolError::new(format!(
                "`{asked}` has {size} bytes, more than the {limit} served"
            )));
        }
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        file.take(limit)
            .read_to_end(&mut bytes)
            .map_err(|error| self.refused(asked, &error))?;
        Ok(bytes)
    }

    /// Creates or replaces a regular file beneath the root (and its directories).
    pub fn write_bytes(&self, asked: &str, bytes: &[u8]) -> Result<Written, ToolError> {
        let relative = self.relative(asked)?;
        let failed = |error: std::io::Error| self.refused(asked, &error);
        if let Some(parent) = relative.parent().filter(|p| !p.as_os_str().is_empty())
            && let Err(error) = self.dir.create_dir_all(parent)
        {
            // A parent that exists but is no directory beneath the root (a link out, say):
            // opening it says which.
            return Err(match self.dir.open_dir(parent) {
                Err(opening) => failed(opening),
                Ok(_) => failed(error),
            });
        }
        let existed = self.dir.symlink_metadata(&relative).is_ok();
        let mut options = OpenOptions::new();
        options.write(true).create(true);
        never_block(&mut options);
        let mut file = self.dir.open_with(&relative, &options).map_err(failed)?;
        let metadata = file.metadata().map_err(failed)?;
        if !metadata.is_file() {
            return Err(not_regular(asked));
        }
        // Truncated only once it is known to be a regular file.
        file.set_len(0).map_err(failed)?;
        file.write_all(bytes).map_err(failed)?;
        Ok(if existed {
            Written::Replaced
        } else {
            Written::Created
        })
    }

    /// Deletes a file, a link, or a directory (with what it holds only if `recursive`).
    pub fn remove(&self, asked: &str, recursive: bool) -> Result<(), ToolError> {
        let relative = self.relative(asked)?;
        if relative == std::path::Path::new(".") {
            return Err(ToolError::new("the workspace's root cannot be deleted"));
        }
        let failed = |error: std::io::Error| self.refused(asked, &error);
        let metadata = self.dir.symlink_metadata(&relative).map_err(failed)?;
        if !metadata.is_dir() {
            return self.dir.remove_file(&relative).map_err(failed);
        }
        if recursive {
            self.dir.remove_dir_all(&relative).map_err(failed)
        } else {
            self.dir.remove_dir(&relative).map_err(|error| {
                if self
                    .dir
                    .read_dir(&relative)
                    .is_ok_and(|mut dir| dir.next().is_some())
                {
                    ToolError::new(format!(
                        "`{asked}` is a directory that is not empty; delete it recursively"
                    ))
                } else {
                    failed(error)
                }
            })
        }
    }

    /// Creates a directory and its parents beneath the root.
    pub fn create_dir(&self, asked: &str) -> Result<Entry, ToolError> {
        let relative = self.relative(asked)?;
        self.dir
            .create_dir_all(&relative)
            .map_err(|error| self.refused(asked, &error))?;
        self.entry(asked)
    }
}
