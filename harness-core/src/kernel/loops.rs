//! Loop detection: the agent repeating itself.

use std::collections::VecDeque;

use harness_tags::{Severity, ToolCall};

use super::canonical::canonical_json;

/// When the loop detector fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoopConfig {
    /// The same tool call (name and canonical arguments) this many times within the recent
    /// window. 0 turns the check off.
    pub repeated_call: usize,
    /// The same assistant text this many times in a row. 0 turns the check off.
    pub repeated_thought: usize,
    /// This many responses in a row without a tool call while the run is kept going (by
    /// nudges or vetoes). 0 turns the check off.
    pub no_action: usize,
    /// How many recent tool calls the repeated-call check looks at.
    pub window: usize,
}

impl Default for LoopConfig {
    /// 3 repeated calls within the last 10, 3 repeated thoughts, 3 responses without action.
    fn default() -> Self {
        LoopConfig {
            repeated_call: 3,
            repeated_thought: 3,
            no_action: 3,
            window: 10,
        }
    }
}

/// A detected loop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoopSignal {
    /// `repeated-tool-call`, `repeated-thought` or `no-action`.
    pub trigger: &'static str,
    /// `warn` the first time, `critical` when it keeps happening.
    pub severity: Severity,
    /// The nudge text for the model.
    pub message: String,
}

/// Watches a run's responses for repetition.
#[derive(Debug, Default)]
pub(crate) struct LoopDetector {
    config: LoopConfig,
    recent_calls: VecDeque<String>,
    last_thought: Option<String>,
    thought_repeats: usize,
    responses_without_action: usize,
    hits: u32,
}

impl LoopDetector {
    pub(crate) fn new(config: LoopConfig) -> Self {
        LoopDetector {
            config,
            ..LoopDetector::default()
        }
    }

    /// How many times a loop was detected in this run.
    pub(crate) fn hits(&self) -> u32 {
        self.hits
    }

    /// Records one model response and says whether the agent is looping.
    pub(crate) fn observe(&mut self, text: &str, calls: &[ToolCall]) -> Option<LoopSignal> {
        let mut signal = None;
        if calls.is_empty() {
            self.responses_without_action += 1;
            if self.config.no_action > 0 && self.responses_without_action >= self.config.no_action {
                signal = Some((
                    "no-action",
                    format!(
                        "You have answered {} times without calling a tool while the task is not \
                         done. Take a concrete step with a tool, or state clearly what blocks you.",
                        self.responses_without_action
                    ),
                ));
                self.responses_without_action = 0;
            }
        } else {
            self.responses_without_action = 0;
        }

        for call in calls {
            let key = format!("{}:{}", call.name, canonical_json(&call.arguments));
            let repeats = 1 + self
                .recent_calls
                .iter()
                .filter(|seen| **seen == key)
                .count();
            self.recent_calls.push_back(key);
            while self.recent_calls.len() > self.config.window.max(1) {
                self.recent_calls.pop_front();
            }
            if self.config.repeated_call > 0
                && repeats >= self.config.repeated_call
                && signal.is_none()
            {
                signal = Some((
                    "repeated-tool-call",
                    format!(
                        "You have called `{}` with the same arguments {repeats} times. The result \
                         will not change: use what you already have, or try a different approach.",
                        call.name
                    ),
                ));
                self.recent_calls.clear();
            }
        }

        let thought = text.trim();
        if !thought.is_empty() {
            if self.last_thought.as_deref() == Some(thought) {
                self.thought_repeats += 1;
            } else {
                self.last_thought = Some(thought.to_owned());
                self.thought_repeats = 1;
            }
            if self.config.repeated_thought > 0
                && self.thought_repeats >= self.config.repeated_thought
                && signal.is_none()
            {
                signal = Some((
                    "repeated-thought",
                    format!(
                        "You have written the same message {} times in a row. Step back and try \
                         something different.",
                        self.thought_repeats
                    ),
                ));
                self.thought_repeats = 0;
            }
        }

        signal.map(|(trigger, message)| {
            self.hits += 1;
            LoopSignal {
                trigger,
                severity: if self.hits > 1 {
                    Severity::Critical
                } else {
                    Severity::Warn
                },
                message,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(arguments: serde_json::Value) -> ToolCall {
        ToolCall {
            id: "c".into(),
            name: "read_file".into(),
            arguments,
        }
    }

    #[test]
    fn the_same_call_in_any_key_order_is_a_repeat() {
        let mut detector = LoopDetector::new(LoopConfig::default());
        assert!(
            detector
                .observe("", &[call(json!({"a": 1, "b": {"x": 1, "y": 2}}))])
                .is_none()
        );
        assert!(
            detector
                .observe("", &[call(json!({"b": {"y": 2, "x": 1}, "a": 1}))])
                .is_none()
        );
        let signal = detector
            .observe("", &[call(json!({"a": 1, "b": {"x": 1, "y": 2}}))])
            .unwrap();
        assert_eq!(
            (signal.trigger, signal.severity),
            ("repeated-tool-call", Severity::Warn)
        );
        assert!(detector.observe("", &[call(json!({"a": 2}))]).is_none());
        assert_eq!(detector.hits(), 1);
    }

    #[test]
    fn nested_keys_count_in_the_canonical_form() {
        let mut detector = LoopDetector::new(LoopConfig::default());
        for depth_value in 0..5 {
            let signal = detector.observe("", &[call(json!({"a": {"nested": depth_value}}))]);
            assert!(
                signal.is_none(),
                "calls differing only in a nested key are not repeats"
            );
        }
    }

    #[test]
    fn repeated_thoughts_and_inaction_fire_and_escalate() {
        let mut detector = LoopDetector::new(LoopConfig {
            no_action: 0,
            ..LoopConfig::default()
        });
        assert!(
            detector
                .observe("Let me think.", &[call(json!({}))])
                .is_none()
        );
        assert!(
            detector
                .observe("Let me think.", &[call(json!({"x": 1}))])
                .is_none()
        );
        let signal = detector
            .observe(" Let me think. ", &[call(json!({"x": 2}))])
            .unwrap();
        assert_eq!(signal.trigger, "repeated-thought");

        let mut detector = LoopDetector::new(LoopConfig::default());
        assert!(detector.observe("a", &[]).is_none());
        assert!(detector.observe("b", &[]).is_none());
        let first = detector.observe("c", &[]).unwrap();
        assert_eq!(
            (first.trigger, first.severity),
            ("no-action", Severity::Warn)
        );
        detector.observe("d", &[]);
        detector.observe("e", &[]);
        let second = detector.observe("f", &[]).unwrap();
        assert_eq!(second.severity, Severity::Critical);
    }

    #[test]
    fn zero_thresholds_turn_checks_off() {
        let config = LoopConfig {
            repeated_call: 0,
            repeated_thought: 0,
            no_action: 0,
            window: 10,
        };
        let mut detector = LoopDetector::new(config);
        for _ in 0..10 {
            assert!(detector.observe("same", &[call(json!({}))]).is_none());
        }
    }
}
