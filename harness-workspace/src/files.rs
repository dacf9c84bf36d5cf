//! `read_file`, `write_file` and `list_dir`: each opens its path beneath the root.

use std::io::{BufRead, BufReader, Read};

use harness_core::tool::ToolError;

use crate::Workspace;

/// The most bytes `read_file` returns (and reads, past the lines it skips).
pub(super) const MAX_READ: usize = 256 * 1024;
/// The most entries `list_dir` returns.
const MAX_ENTRIES: usize = 500;
/// The most entries `list_dir` looks at (to sort them); past that it says there are more.
const MAX_SCANNED: usize = 20_000;

impl Workspace {
    /// Lines `offset..offset + limit` (1-based) of a text file, at most [`MAX_READ`] bytes,
    /// reading no more of the file than that (lines before `offset` are skipped unstored).
    pub(super) fn read_text(
        &self,
        asked: &str,
        offset: Option<usize>,
        limit: Option<usize>,
    ) -> Result<String, ToolError> {
        let (file, size) = self.open_regular(asked)?;
        let mut reader = BufReader::new(file);
        let failed = |error: std::io::Error| self.refused(asked, &error);
        for _ in 1..offset.unwrap_or(1) {
            if reader.skip_until(b'\n').map_err(failed)? == 0 {
                break;
            }
        }
        let mut text = Vec::new();
        let mut lines = 0;
        let mut cut = false;
        while lines < limit.unwrap_or(usize::MAX) {
            // One byte more than fits tells a cut from a file that ends exactly at the limit.
            let room = (MAX_READ - text.len()) as u64 + 1;
            let read = (&mut reader)
                .take(room)
                .read_until(b'\n', &mut text)
                .map_err(failed)?;
            if read == 0 {
                break;
            }
            if text.len() > MAX_READ {
                text.truncate(MAX_READ);
                cut = true;
                break;
            }
            lines += 1;
        }
        let mut text = match String::from_utf8(text) {
            Ok(text) => text,
            // The cut fell inside a character: end before it.
            Err(error) if cut && error.utf8_error().error_len().is_none() => {
                let valid = error.utf8_error().valid_up_to();
                let mut bytes = error.into_bytes();
                bytes.truncate(valid);
                String::from_utf8(bytes).map_err(|_| not_text(asked))?
            }
            Err(_) => return Err(not_text(asked)),
        };
        if cut {
            text.push_str(&format!(
                "\n[truncated after {} bytes of a {size}-byte file: read the rest with `offset` \
                 and `limit`]",
                text.len()
            ));
        }
        Ok(text)
    }

    /// Creates or replaces a regular file beneath the root (and its directories).
    pub(super) fn write_text(&self, asked: &str, content: &str) -> Result<String, ToolError> {
        self.write_bytes(asked, content.as_bytes())?;
        let relative = self.relative(asked)?;
        Ok(format!(
            "Wrote {} bytes to {}",
            content.len(),
            relative.display()
        ))
    }

    /// A directory's entries, sorted, directories with a trailing `/`.
    pub(super) fn list(&self, asked: &str) -> Result<String, ToolError> {
        let relative = self.relative(asked)?;
        let failed = |error: std::io::Error| self.refused(asked, &error);
        let mut entries = Vec::new();
        let mut more = false;
        for entry in self.dir.read_dir(&relative).map_err(failed)? {
            let Ok(entry) = entry else { continue };
            if entries.len() == MAX_SCANNED {
                more = true;
                break;
            }
            let mut name = entry.file_name().to_string_lossy().into_owned();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                name.push('/');
            }
            entries.push(name);
        }
        entries.sort();
        let total = entries.len();
        entries.truncate(MAX_ENTRIES);
        let mut listing = entries.join("\n");
        if more {
            listing.push_str(&format!(
                "\n[more than {MAX_SCANNED} entries; {MAX_ENTRIES} of them shown]"
            ));
        } else if total > MAX_ENTRIES {
            listing.push_str(&format!("\n[{} more entries]", total - MAX_ENTRIES));
        }
        if listing.is_empty() {
            listing = format!("{} is empty", relative.display());
        }
        Ok(listing)
    }
}

fn not_text(asked: &str) -> ToolError {
    ToolError::new(format!("`{asked}` is not a UTF-8 text file"))
}
