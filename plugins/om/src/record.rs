//! The record observational memory keeps per thread, in the store's `om` namespace.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The store namespace of the records.
pub const NAMESPACE: &str = "om";

/// Observations one observer pass produced, with the sections that follow the log.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Observed {
    /// The dated observation lines.
    pub observations: String,
    /// What the agent is working on, if the observer said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_task: Option<String>,
    /// What the agent should do next, if the observer said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suggested_continuation: Option<String>,
}

/// Observations made in the background, ready to replace the messages they cover.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BufferedChunk {
    /// What the observer wrote.
    pub observed: Observed,
    /// Tokens of the observations.
    pub observation_tokens: u64,
    /// The messages covered, in order (their positions follow the previous chunk's).
    pub message_ids: Vec<String>,
    /// Tokens of the messages covered.
    pub message_tokens: u64,
}

/// One thread's observational memory.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OmRecord {
    /// The reflector's latest rewrite of older observations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reflection: Option<String>,
    /// The active observation blocks since the reflection, oldest first.
    pub observations: Vec<String>,
    /// The latest current-task section.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_task: Option<String>,
    /// The latest suggested-continuation section.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suggested_continuation: Option<String>,
    /// Tokens of the reflection and the active observations.
    pub observation_tokens: u64,
    /// How many of the thread's messages (from its first) the memory covers.
    pub observed_count: u64,
    /// The id of the last message covered (a check that the thread is the one observed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_observed_id: Option<String>,
    /// Chunks observed ahead of activation; the first starts right after the covered ones.
    pub buffered: Vec<BufferedChunk>,
    /// How many reflections have run.
    pub generation: u32,
    /// Tokens of raw messages replaced by observations so far.
    pub observed_tokens: u64,
    /// The provider of the thread's last model call (for the provider-change trigger).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_provider: Option<String>,
}

impl OmRecord {
    /// True if there is anything to put before the raw messages.
    pub fn has_memory(&self) -> bool {
        self.reflection.is_some() || !self.observations.is_empty()
    }

    /// Where the buffered chunks end: the position the next chunk starts at.
    pub fn buffered_end(&self) -> u64 {
        self.observed_count
            + self
                .buffered
                .iter()
                .map(|c| c.message_ids.len() as u64)
                .sum::<u64>()
    }

    /// The record for a copy of the thread whose message ids were renamed by `id_map`.
    /// Coverage stops where a message has no copy (a fork taken before it): buffered chunks
    /// from there are dropped, and if a covered message is missing the memory cannot apply
    /// to the copy at all (`None`).
    pub fn remapped(&self, id_map: &BTreeMap<String, String>) -> Option<OmRecord> {
        let last_observed_id = match &self.last_observed_id {
            Some(id) => Some(id_map.get(id)?.clone()),
            None => None,
        };
        let mut buffered = Vec::new();
        for chunk in &self.buffered {
            let ids: Option<Vec<String>> = chunk
                .message_ids
                .iter()
                .map(|id| id_map.get(id).cloned())
                .collect();
            let Some(message_ids) = ids else { break };
            buffered.push(BufferedChunk {
                message_ids,
                ..chunk.clone()
            });
        }
        Some(OmRecord {
            last_observed_id,
            buffered,
            ..self.clone()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(ids: &[&str]) -> BufferedChunk {
        BufferedChunk {
            observed: Observed {
                observations: format!("saw {}", ids.join(",")),
                ..Observed::default()
            },
            observation_tokens: 3,
            message_ids: ids.iter().map(|s| (*s).to_owned()).collect(),
            message_tokens: 100,
        }
    }

    #[test]
    fn remapping_renames_ids_and_drops_what_the_copy_lacks() {
        let record = OmRecord {
            observations: vec!["- 10:00 [high] user wants Postgres".into()],
            observed_count: 2,
            last_observed_id: Some("m2".into()),
            buffered: vec![chunk(&["m3", "m4"]), chunk(&["m5"])],
            ..OmRecord::default()
        };
        let map: BTreeMap<String, String> =
            [("m1", "n1"), ("m2", "n2"), ("m3", "n3"), ("m4", "n4")]
                .map(|(a, b)| (a.into(), b.into()))
                .into();
        let copy = record.remapped(&map).unwrap();
        assert_eq!(copy.last_observed_id.as_deref(), Some("n2"));
        assert_eq!(copy.buffered.len(), 1, "the chunk covering m5 has no copy");
        assert_eq!(copy.buffered[0].message_ids, ["n3", "n4"]);
        assert_eq!(copy.observations, record.observations);
        assert_eq!(copy.buffered_end(), 4);

        let short: BTreeMap<String, String> = [("m1".to_owned(), "n1".to_owned())].into();
        assert_eq!(
            record.remapped(&short),
            None,
            "the copy lacks a covered message"
        );
    }
}
