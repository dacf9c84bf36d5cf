//! Strategy control: failures, the strategy evaluation, and switching or escalating.

use std::sync::Arc;

use harness_tags::tags::{ControlStrategyEvaluated, LifecycleFailureTag, NudgeStrategyHandoff};
use harness_tags::{
    EmitOutcome, FailureReason, KernelMessage, LifecycleFailure, ObservationStep, Phase, Severity,
    StrategyAction,
};
use serde_json::{Map, Value};

use crate::kernel::state::{Transition, apply};
use crate::kernel::strategy::{RunHealth, evaluate, next_untried};
use crate::kernel::{KernelError, KernelEvent};
use crate::model::ModelError;

use super::{Decision, End, Run};

impl Run<'_> {
    /// Records a failure: `lifecycle.failure`, the streak, a step.
    pub(super) async fn failure(&mut self, reason: FailureReason, message: String) {
        self.health.failure_streak += 1;
        apply(
            &mut self.state,
            Transition::FailureStreak(self.health.failure_streak),
        );
        let failure = LifecycleFailure {
            reason,
            error_message: message,
            attempt_number: self.iteration,
            failure_streak: self.health.failure_streak,
            current_strategy: self.strategy_name.to_string(),
        };
        let ctx = self.base(Phase::Observe);
        let failure = match self
            .kernel
            .pipeline
            .emit::<LifecycleFailureTag>(failure.clone(), &ctx)
            .await
        {
            Ok(EmitOutcome::Continue(reshaped)) => reshaped,
            _ => failure,
        };
        drop(ctx);
        let mut metadata = Map::new();
        metadata.insert(
            "reason".into(),
            serde_json::to_value(failure.reason).unwrap_or(Value::Null),
        );
        metadata.insert("failureStreak".into(), Value::from(failure.failure_streak));
        apply(
            &mut self.state,
            Transition::AddStep(ObservationStep {
                kind: "failure".to_owned(),
                content: Some(failure.error_message.clone()),
                metadata: Some(metadata),
            }),
        );
        self.notify(|| KernelEvent::Failure { failure });
    }

    /// Scores the strategy after a failure and acts on the (reshaped) recommendation.
    pub(super) async fn after_failure(&mut self) -> Decision {
        let health = RunHealth {
            loop_hits: self.loops.hits(),
            ..self.health
        };
        let evaluation = evaluate(
            &self.config.strategy,
            &self.strategies,
            self.strategy,
            &self.tried,
            health,
        );
        let ctx = self.base(Phase::Observe);
        let evaluation = match self
            .kernel
            .pipeline
            .emit::<ControlStrategyEvaluated>(evaluation.clone(), &ctx)
            .await
        {
            Ok(EmitOutcome::Continue(reshaped)) => reshaped,
            _ => evaluation,
        };
        drop(ctx);
        match evaluation.recommended_action {
            StrategyAction::Continue => Decision::Continue,
            StrategyAction::Switch => match next_untried(self.strategy, &self.tried) {
                Some(next) => self.switch_to(next).await,
                None => self.escalate().await,
            },
            StrategyAction::Escalate => self.escalate().await,
        }
    }

    pub(super) async fn switch_to(&mut self, next: usize) -> Decision {
        self.tried[next] = true;
        let strategy = self.strategies[next].clone();
        if let Some(model_id) = &strategy.model {
            let resolved = match &self.kernel.resolver {
                Some(resolve) => resolve(model_id),
                None => Err(ModelError::Config {
                    provider: model_id.provider().to_owned(),
                    message: format!(
                        "strategy `{}` names model `{model_id}`, but the kernel has no model \
                         resolver; set one with `KernelBuilder::model_resolver`",
                        strategy.name
                    ),
                }),
            };
            match resolved {
                Ok(model) => {
                    self.model_id = Arc::from(model.id().as_str());
                    self.model = model;
                }
                Err(error) => return Decision::End(End::failed(KernelError::Model(error))),
            }
        }
        let all = self.all_tools.as_ref().unwrap_or(&self.kernel.tools);
        self.tools = match &strategy.tools {
            Some(names) => all.subset(names.iter().map(String::as_str)),
            None => all.clone(),
        };
        self.strategy = next;
        self.strategy_name = Arc::from(strategy.name.as_str());
        apply(&mut self.state, Transition::Strategy(strategy.name.clone()));
        self.health.failure_streak = 0;
        apply(&mut self.state, Transition::FailureStreak(0));
        let mut text = format!(
            "Switching to the `{}` strategy after repeated failures.",
            strategy.name
        );
        if let Some(instructions) = &strategy.instructions {
            text.push(' ');
            text.push_str(instructions);
        }
        self.nudge::<NudgeStrategyHandoff>(text, "strategy-switch", Severity::Warn)
            .await;
        Decision::Switched
    }

    pub(super) async fn escalate(&mut self) -> Decision {
        let reason = format!(
            "the `{}` strategy keeps failing ({} failures in a row) and no other strategy is left",
            self.strategy_name, self.health.failure_streak
        );
        let Some(channel) = self.channel.clone() else {
            return Decision::End(End::failed(KernelError::Escalated { reason }));
        };
        let answer = tokio::select! {
            biased;
            () = self.abort.cancelled() => return Decision::End(End::aborted()),
            answer = channel.escalate(&reason) => answer,
        };
        match answer {
            Some(message) => {
                self.add_message(KernelMessage::user(message));
                self.health.failure_streak = 0;
                apply(&mut self.state, Transition::FailureStreak(0));
                Decision::Escalated
            }
            None => Decision::End(End::failed(KernelError::Escalated { reason })),
        }
    }
}
