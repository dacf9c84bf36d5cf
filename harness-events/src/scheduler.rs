//! The display scheduler: folds every event into the display state at once and decides when
//! user interfaces get a new snapshot.
//!
//! Timing (the Mastra Harness reference's):
//!
//! - Ordinary events (message and tool-input deltas, tool progress, usage, OM progress, ...)
//!   are batched: a snapshot goes out once no event came for the *window* (250 ms), and at the
//!   latest the *ceiling* (500 ms) after the first unpublished event, so a steady stream still
//!   yields a snapshot at least every 500 ms (at most ~2 per second while streaming).
//! - The events listed in [`flushes_at_once`] (a human must act, or the run, thread, mode or
//!   model changed, or a tool or subagent finished) publish a snapshot before `fold` returns,
//!   with no timer involved; it includes everything batched so far.
//!
//! The timer is one Tokio task per scheduler, spawned on the first batched event inside a Tokio
//! runtime and stopped when the scheduler is dropped. It uses Tokio's clock, so tests can run it
//! with `tokio::time::pause()`. Outside a runtime nothing is spawned: a batch is then published by
//! the next event past its deadline, by an event that flushes at once, or by
//! [`DisplayScheduler::flush`].
//!
//! Snapshots are `Arc<DisplayState>`: immutable, so a subscriber may keep a frame as long as it
//! likes. A snapshot that falls due while nobody watches (no display subscriber, no one to
//! announce it to on the bus) is not built: the next reader ([`DisplayScheduler::latest`],
//! [`DisplayScheduler::subscribe`]) gets it built then, with everything folded so far. [`DisplayScheduler::subscribe`] has latest-value semantics: a slow user interface
//! skips intermediate frames and always gets the newest one.

use std::fmt;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::stream::{self, Stream, StreamExt};
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use harness_protocol::{EventEnvelope, EventScope};
use harness_tags::util::{lock, unix_ms};

use harness_protocol::{DisplayState, HarnessEvent, WallClock, reduce_with_clock};

use crate::bus::EventBus;

/// The batching window: a snapshot goes out once no event came for this long.
pub const DEFAULT_WINDOW: Duration = Duration::from_millis(250);

/// The batching ceiling: a snapshot goes out at the latest this long after the first event it
/// holds.
pub const DEFAULT_CEILING: Duration = Duration::from_millis(500);

/// True for the events that publish a snapshot at once instead of batching: `agent_start`,
/// `agent_end`, `follow_up_queued`, `error`, `tool_approval_required`,
/// `tool_approval_answered`, `tool_suspended`,
/// `thread_changed`, `thread_created`, `thread_deleted`, `mode_changed`, `model_changed`,
/// `state_changed`, `tool_input_end`, `tool_end` and `subagent_end`.
pub fn flushes_at_once(event: &HarnessEvent) -> bool {
    matches!(
        event,
        HarnessEvent::AgentStart { .. }
            | HarnessEvent::AgentEnd { .. }
            | HarnessEvent::FollowUpQueued { .. }
            | HarnessEvent::Error { .. }
            | HarnessEvent::ToolApprovalRequired { .. }
            | HarnessEvent::ToolApprovalAnswered { .. }
            | HarnessEvent::ToolSuspended { .. }
            | HarnessEvent::ThreadChanged { .. }
            | HarnessEvent::ThreadCreated { .. }
            | HarnessEvent::ThreadDeleted { .. }
            | HarnessEvent::ModeChanged { .. }
            | HarnessEvent::ModelChanged { .. }
            | HarnessEvent::StateChanged { .. }
            | HarnessEvent::ToolInputEnd { .. }
            | HarnessEvent::ToolEnd { .. }
            | HarnessEvent::SubagentEnd { .. }
    )
}

/// How the scheduler batches, and the clock the reducer stamps modified files with.
#[derive(Clone)]
pub struct DisplayConfig {
    /// A batch is published once no event came for this long ([`DEFAULT_WINDOW`]).
    pub window: Duration,
    /// A batch is published at the latest this long after its first event
    /// ([`DEFAULT_CEILING`]).
    pub ceiling: Duration,
    /// The wall clock for `ModifiedFile::first_modified` (the system clock by default).
    pub clock: WallClock,
}

impl Default for DisplayConfig {
    fn default() -> Self {
        DisplayConfig {
            window: DEFAULT_WINDOW,
            ceiling: DEFAULT_CEILING,
            clock: Arc::new(unix_ms),
        }
    }
}

impl fmt::Debug for DisplayConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DisplayConfig")
            .field("window", &self.window)
            .field("ceiling", &self.ceiling)
            .finish_non_exhaustive()
    }
}

/// The state being folded and its unpublished batch.
struct Core {
    state: DisplayState,
    /// True if the state has changes no snapshot holds yet.
    dirty: bool,
    /// True if a snapshot was due while nobody could see it: it is built when asked for.
    owed: bool,
    /// When the oldest unpublished event came.
    first_pending: Instant,
    /// When the newest unpublished event came.
    last_event: Instant,
    /// The thread and run of the last event, for the `display_state_changed` it leads to.
    scope: EventScope,
}

/// What the timer task shares with the scheduler without keeping it alive.
#[derive(Default)]
struct Timer {
    wake: Notify,
    running: AtomicBool,
}

struct Inner {
    core: Mutex<Core>,
    snapshots: watch::Sender<Arc<DisplayState>>,
    timer: Arc<Timer>,
    window: Duration,
    ceiling: Duration,
    clock: WallClock,
    /// The bus that events and `display_state_changed` go to, in one order (for the hub).
    bus: Option<EventBus>,
    /// Whether each snapshot is also published on the bus as `display_state_changed`.
    announce: bool,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, Core> {
        lock(&self.core)
    }

    fn deadline(&self, core: &Core) -> Instant {
        (core.last_event + self.window).min(core.first_pending + self.ceiling)
    }

    /// Publishes a snapshot of the state; returns the `display_state_changed` envelope for the
    /// bus's listeners, if one was sent. With no display subscriber and nobody to announce it
    /// to, the snapshot is only owed: [`DisplayScheduler::latest`] and
    /// [`DisplayScheduler::subscribe`] build it when asked (a harness with no user interface
    /// attached copies no state).
    fn flush_locked(&self, core: &mut Core) -> Option<Arc<EventEnvelope>> {
        core.dirty = false;
        let announced = self
            .bus
            .as_ref()
            .filter(|bus| self.announce && bus.subscriber_count() + bus.listener_count() > 0);
        if self.snapshots.receiver_count() == 0 && announced.is_none() {
            core.owed = true;
            return None;
        }
        core.owed = false;
        let snapshot = Arc::new(core.state.clone());
        self.snapshots.send_replace(Arc::clone(&snapshot));
        let bus = announced?;
        let announcement = HarnessEvent::DisplayStateChanged {
            display_state: snapshot,
        };
        Some(bus.send_to_subscribers(announcement, &core.scope))
    }

    fn notify_listeners(&self, envelope: Option<Arc<EventEnvelope>>) {
        if let (Some(bus), Some(envelope)) = (&self.bus, envelope) {
            bus.notify_listeners(&envelope);
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Lets an idle timer task notice that the scheduler is gone.
        self.timer.wake.notify_one();
    }
}

/// Clears the timer's `running` flag when its task ends, including when its runtime shuts
/// down, so that a later event can start a new one.
struct RunningFlag(Arc<Timer>);

impl Drop for RunningFlag {
    fn drop(&mut self) {
        self.0.running.store(false, Ordering::Release);
    }
}

/// What the timer does next.
enum TimerStep {
    /// Nothing is batched: wait for a wake-up.
    Idle,
    /// Sleep until the batch is due.
    SleepUntil(Instant),
}

impl Inner {
    /// Publishes the batch if it is due; otherwise says how long to wait.
    fn timer_step(&self) -> TimerStep {
        let mut core = self.lock();
        if !core.dirty {
            return TimerStep::Idle;
        }
        let deadline = self.deadline(&core);
        if Instant::now() < deadline {
            return TimerStep::SleepUntil(deadline);
        }
        let announcement = self.flush_locked(&mut core);
        drop(core);
        self.notify_listeners(announcement);
        TimerStep::Idle
    }
}

async fn run_timer(scheduler: Weak<Inner>, timer: Arc<Timer>) {
    let _running = RunningFlag(Arc::clone(&timer));
    loop {
        timer.wake.notified().await;
        loop {
            let Some(inner) = scheduler.upgrade() else {
                return;
            };
            let step = inner.timer_step();
            drop(inner);
            match step {
                TimerStep::Idle => break,
                TimerStep::SleepUntil(deadline) => tokio::time::sleep_until(deadline).await,
            }
        }
    }
}

/// Folds events into the display state and publishes snapshots on the schedule described in
/// the [module docs](self). Cloning gives another handle to the same scheduler.
#[derive(Clone)]
pub struct DisplayScheduler {
    inner: Arc<Inner>,
}

impl DisplayScheduler {
    /// A scheduler starting from an empty state.
    pub fn new(config: DisplayConfig) -> Self {
        Self::build(config, None, false)
    }

    /// A scheduler that also publishes the events it folds (and, if `announce`, each snapshot
    /// as `display_state_changed`) on `bus`, in one consistent order.
    pub(crate) fn with_bus(config: DisplayConfig, bus: EventBus, announce: bool) -> Self {
        Self::build(config, Some(bus), announce)
    }

    fn build(config: DisplayConfig, bus: Option<EventBus>, announce: bool) -> Self {
        let (snapshots, _) = watch::channel(Arc::new(DisplayState::default()));
        let now = Instant::now();
        DisplayScheduler {
            inner: Arc::new(Inner {
                core: Mutex::new(Core {
                    state: DisplayState::default(),
                    dirty: false,
                    owed: false,
                    first_pending: now,
                    last_event: now,
                    scope: EventScope::default(),
                }),
                snapshots,
                timer: Arc::new(Timer::default()),
                window: config.window,
                ceiling: config.ceiling,
                clock: config.clock,
                bus,
                announce,
            }),
        }
    }

    /// Folds one event into the state and publishes a snapshot if it is due.
    pub fn fold(&self, event: &HarnessEvent) {
        let mut core = self.inner.lock();
        reduce_with_clock(&mut core.state, event, &*self.inner.clock);
        let announcement = self.schedule(core, event);
        self.inner.notify_listeners(announcement);
    }

    /// Folds an event, queues it in its envelope for the bus's subscribers and, if due,
    /// publishes a snapshot, all under one lock so that the bus's order (and `seq`) matches
    /// the snapshots'. Returns the event's envelope and the `display_state_changed` envelope
    /// sent, if any, for the bus's listeners, which the caller runs outside the lock.
    pub(crate) fn fold_and_send(
        &self,
        bus: &EventBus,
        event: HarnessEvent,
        scope: &EventScope,
    ) -> (Arc<EventEnvelope>, Option<Arc<EventEnvelope>>) {
        let mut core = self.inner.lock();
        reduce_with_clock(&mut core.state, &event, &*self.inner.clock);
        if core.scope != *scope {
            core.scope = scope.clone();
        }
        let envelope = bus.send_to_subscribers(event, scope);
        let announcement = self.schedule(core, &envelope.event);
        (envelope, announcement)
    }

    /// Publishes a snapshot now if `event` flushes at once or the batch is overdue; otherwise
    /// makes sure the timer will. Releases the lock.
    fn schedule(
        &self,
        mut core: MutexGuard<'_, Core>,
        event: &HarnessEvent,
    ) -> Option<Arc<EventEnvelope>> {
        let inner = &*self.inner;
        if flushes_at_once(event) {
            return inner.flush_locked(&mut core);
        }
        if matches!(event, HarnessEvent::DisplayStateChanged { .. }) {
            return None;
        }
        let now = Instant::now();
        if core.dirty {
            // Normally the timer publishes the batch; this covers a timer that cannot run
            // (no runtime, or a runtime too busy to poll it).
            let overdue = now >= inner.deadline(&core);
            core.last_event = now;
            if overdue {
                return inner.flush_locked(&mut core);
            }
            drop(core);
            if !inner.timer.running.load(Ordering::Acquire) {
                self.start_timer();
            }
        } else {
            core.dirty = true;
            core.first_pending = now;
            core.last_event = now;
            drop(core);
            inner.timer.wake.notify_one();
            if !inner.timer.running.load(Ordering::Acquire) {
                self.start_timer();
            }
        }
        None
    }

    fn start_timer(&self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if self.inner.timer.running.swap(true, Ordering::AcqRel) {
            return;
        }
        // A pending wake-up makes the new task look at the batch straight away.
        self.inner.timer.wake.notify_one();
        runtime.spawn(run_timer(
            Arc::downgrade(&self.inner),
            Arc::clone(&self.inner.timer),
        ));
    }

    /// Publishes a snapshot now if events are waiting for one.
    pub fn flush(&self) {
        let mut core = self.inner.lock();
        if !core.dirty {
            return;
        }
        let announcement = self.inner.flush_locked(&mut core);
        drop(core);
        self.inner.notify_listeners(announcement);
    }

    /// The latest published snapshot. A snapshot that was due while nobody watched is built
    /// now, with everything folded so far.
    pub fn latest(&self) -> Arc<DisplayState> {
        self.pay_owed();
        Arc::clone(&self.inner.snapshots.borrow())
    }

    /// Publishes the snapshot owed to readers that were not there when it was due.
    fn pay_owed(&self) {
        let mut core = self.inner.lock();
        if core.owed {
            core.owed = false;
            core.dirty = false;
            let snapshot = Arc::new(core.state.clone());
            self.inner.snapshots.send_replace(snapshot);
        }
    }

    /// How many snapshot streams are open.
    pub fn subscriber_count(&self) -> usize {
        self.inner.snapshots.receiver_count()
    }

    /// A stream of snapshots: the latest one at once, then each newer one. A slow reader skips
    /// to the newest. The stream ends when the scheduler is dropped.
    pub fn subscribe(&self) -> DisplayStateStream {
        self.pay_owed();
        let receiver = self.inner.snapshots.subscribe();
        DisplayStateStream {
            inner: Box::pin(stream::unfold(
                (receiver, true),
                |(mut receiver, first)| async move {
                    if !first && receiver.changed().await.is_err() {
                        return None;
                    }
                    let snapshot = Arc::clone(&receiver.borrow_and_update());
                    Some((snapshot, (receiver, false)))
                },
            )),
        }
    }
}

impl Default for DisplayScheduler {
    fn default() -> Self {
        DisplayScheduler::new(DisplayConfig::default())
    }
}

impl fmt::Debug for DisplayScheduler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DisplayScheduler")
            .field("window", &self.inner.window)
            .field("ceiling", &self.inner.ceiling)
            .finish_non_exhaustive()
    }
}

/// A stream of display-state snapshots; see [`DisplayScheduler::subscribe`].
pub struct DisplayStateStream {
    inner: Pin<Box<dyn Stream<Item = Arc<DisplayState>> + Send>>,
}

impl DisplayStateStream {
    /// The next snapshot; `None` once the scheduler is gone. Same as `StreamExt::next`.
    pub async fn recv(&mut self) -> Option<Arc<DisplayState>> {
        self.inner.next().await
    }
}

impl Stream for DisplayStateStream {
    type Item = Arc<DisplayState>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Arc<DisplayState>>> {
        self.get_mut().inner.as_mut().poll_next(cx)
    }
}

impl fmt::Debug for DisplayStateStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DisplayStateStream").finish_non_exhaustive()
    }
}
