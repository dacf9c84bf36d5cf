//! Strategies and the evaluator that decides, after a failure, whether to continue, switch to
//! another strategy or escalate.

use harness_tags::{StrategyAction, StrategyEvaluation};

use crate::model::ModelId;

/// One way of attacking the task: a model, extra instructions, a subset of the tools.
///
/// The kernel starts with the first configured strategy (or an implicit `default` one) and,
/// when the evaluator recommends a switch, moves to the next one it has not tried.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Strategy {
    /// The strategy's name, shown in contexts and events.
    pub name: String,
    /// The model to use; `None` keeps the run's model.
    pub model: Option<ModelId>,
    /// Instructions added to the system prompt.
    pub instructions: Option<String>,
    /// The tools to offer (by name); `None` offers all of them.
    pub tools: Option<Vec<String>>,
}

impl Strategy {
    /// A strategy with only a name: the run's model, instructions and tools.
    pub fn new(name: impl Into<String>) -> Self {
        Strategy {
            name: name.into(),
            model: None,
            instructions: None,
            tools: None,
        }
    }

    /// Uses another model.
    pub fn model(mut self, model: ModelId) -> Self {
        self.model = Some(model);
        self
    }

    /// Adds instructions to the system prompt.
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }

    /// Offers only these tools.
    pub fn tools<S: Into<String>>(mut self, tools: impl IntoIterator<Item = S>) -> Self {
        self.tools = Some(tools.into_iter().map(Into::into).collect());
        self
    }
}

/// How the evaluator scores a strategy and when it recommends a change.
///
/// The score starts at 1.0 and loses `0.2` per consecutive failure, `0.1` per loop detected
/// and `0.1` per healing failure in the run (never below 0). Below `switch_below` the evaluator
/// recommends switching to the next untried strategy; when none is left and the score is below
/// `escalate_below`, it escalates.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StrategyConfig {
    /// Recommend a switch below this score.
    pub switch_below: f64,
    /// Recommend escalation below this score, when no untried strategy is left.
    pub escalate_below: f64,
}

impl Default for StrategyConfig {
    /// Switch below 0.55 (three failures in a row), escalate below 0.25.
    fn default() -> Self {
        StrategyConfig {
            switch_below: 0.55,
            escalate_below: 0.25,
        }
    }
}

/// What the evaluator knows about the run.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RunHealth {
    pub(crate) failure_streak: u32,
    pub(crate) loop_hits: u32,
    pub(crate) healing_failures: u32,
}

/// Scores the current strategy and recommends what to do.
pub(crate) fn evaluate(
    config: &StrategyConfig,
    strategies: &[Strategy],
    current: usize,
    tried: &[bool],
    health: RunHealth,
) -> StrategyEvaluation {
    let score = (1.0
        - 0.2 * f64::from(health.failure_streak)
        - 0.1 * f64::from(health.loop_hits)
        - 0.1 * f64::from(health.healing_failures))
    .max(0.0);
    let score = (score * 100.0).round() / 100.0;
    let untried = tried.iter().any(|tried| !tried);
    let recommended_action = if score >= config.switch_below {
        StrategyAction::Continue
    } else if untried {
        StrategyAction::Switch
    } else if score < config.escalate_below {
        StrategyAction::Escalate
    } else {
        StrategyAction::Continue
    };
    StrategyEvaluation {
        current_strategy: strategies
            .get(current)
            .map(|s| s.name.clone())
            .unwrap_or_default(),
        score,
        failure_streak: health.failure_streak,
        recommended_action,
        available_strategies: strategies.iter().map(|s| s.name.clone()).collect(),
    }
}

/// The next strategy not tried yet, after the current one.
pub(crate) fn next_untried(current: usize, tried: &[bool]) -> Option<usize> {
    let count = tried.len();
    (1..count)
        .map(|offset| (current + offset) % count)
        .find(|&index| !tried[index])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strategies() -> Vec<Strategy> {
        vec![Strategy::new("react"), Strategy::new("careful")]
    }

    fn action(streak: u32, tried: &[bool]) -> StrategyAction {
        let health = RunHealth {
            failure_streak: streak,
            ..RunHealth::default()
        };
        evaluate(&StrategyConfig::default(), &strategies(), 0, tried, health).recommended_action
    }

    #[test]
    fn failures_move_from_continue_to_switch_to_escalate() {
        assert_eq!(action(1, &[true, false]), StrategyAction::Continue);
        assert_eq!(action(2, &[true, false]), StrategyAction::Continue);
        assert_eq!(action(3, &[true, false]), StrategyAction::Switch);
        assert_eq!(action(3, &[true, true]), StrategyAction::Continue);
        assert_eq!(action(4, &[true, true]), StrategyAction::Escalate);
    }

    #[test]
    fn the_evaluation_reports_score_streak_and_strategies() {
        let health = RunHealth {
            failure_streak: 2,
            loop_hits: 1,
            healing_failures: 1,
        };
        let evaluation = evaluate(
            &StrategyConfig::default(),
            &strategies(),
            1,
            &[true, true],
            health,
        );
        assert_eq!(evaluation.current_strategy, "careful");
        assert_eq!(evaluation.score, 0.4);
        assert_eq!(evaluation.failure_streak, 2);
        assert_eq!(evaluation.available_strategies, ["react", "careful"]);
    }

    #[test]
    fn the_next_untried_strategy_wraps_around() {
        assert_eq!(next_untried(0, &[true, false, false]), Some(1));
        assert_eq!(next_untried(2, &[false, true, true]), Some(0));
        assert_eq!(next_untried(0, &[true, true]), None);
    }
}
