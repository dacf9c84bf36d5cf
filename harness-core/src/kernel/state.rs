//! Transitions of the kernel state.
//!
//! The state is shared as `Arc<KernelState>` with every emit's context, so handlers see an
//! immutable snapshot. A transition copies the state only if a snapshot is still held (an
//! async tap working on an old context, say); otherwise it updates in place.

use std::sync::Arc;

use harness_tags::{KernelMessage, KernelState, ObservationStep, Usage};

/// The changes a run makes to its state.
pub(crate) enum Transition {
    AddMessage(KernelMessage),
    AddStep(ObservationStep),
    Iteration(u32),
    FailureStreak(u32),
    Strategy(String),
    Usage(Usage),
}

pub(crate) fn apply(state: &mut Arc<KernelState>, transition: Transition) {
    let state = Arc::make_mut(state);
    match transition {
        Transition::AddMessage(message) => Arc::make_mut(&mut state.messages).push(message),
        Transition::AddStep(step) => state.steps.push(step),
        Transition::Iteration(iteration) => state.iteration = iteration,
        Transition::FailureStreak(streak) => state.failure_streak = streak,
        Transition::Strategy(name) => state.strategy = name,
        Transition::Usage(usage) => state.usage += &usage,
    }
}
