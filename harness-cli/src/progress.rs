//! A spinner on standard error while the agent works and nothing else is printed.
//!
//! It is drawn only when standard error is a terminal, only on an empty line (never over
//! streamed text), and erased before anything else is written. With `NO_COLOR` set it is
//! drawn without colour.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::render::Style;

const FRAMES: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
const TICK: Duration = Duration::from_millis(100);

#[derive(Debug)]
struct State {
    label: Option<String>,
    since: Instant,
    frame: usize,
    drawn: bool,
    line_free: bool,
}

/// The spinner. Cheap to clone; the drawing task ends with the last clone.
#[derive(Clone, Debug)]
pub struct Progress {
    state: Option<Arc<Mutex<State>>>,
}

impl Progress {
    /// A spinner that draws when standard error is a terminal (a no-op otherwise).
    pub fn for_stderr() -> Progress {
        Progress::new(std::io::stderr().is_terminal())
    }

    /// A spinner, drawn only if `enabled`. Must be called inside a Tokio runtime when enabled.
    pub fn new(enabled: bool) -> Progress {
        if !enabled {
            return Progress { state: None };
        }
        let state = Arc::new(Mutex::new(State {
            label: None,
            since: Instant::now(),
            frame: 0,
            drawn: false,
            line_free: true,
        }));
        let weak = Arc::downgrade(&state);
        let style = Style::for_stderr();
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(TICK);
            loop {
                ticks.tick().await;
                let Some(state) = weak.upgrade() else { return };
                let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
                draw(&mut state, style);
            }
        });
        Progress { state: Some(state) }
    }

    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> Option<R> {
        let state = self.state.as_ref()?;
        let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
        Some(f(&mut state))
    }

    /// Shows the spinner with `label` (or hides it with `None`).
    pub fn set(&self, label: Option<&str>) {
        self.with(|state| {
            if state.label.as_deref() != label {
                if state.label.is_none() {
                    state.since = Instant::now();
                }
                state.label = label.map(str::to_owned);
                erase(state);
            }
        });
    }

    /// Erases the spinner and runs `write` (which prints something), then records whether
    /// the output now ends a line (the spinner only draws on an empty line).
    pub fn print(&self, line_free_after: bool, write: impl FnOnce()) {
        let Some(state) = &self.state else {
            write();
            return;
        };
        let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
        erase(&mut state);
        write();
        state.line_free = line_free_after;
    }
}

fn erase(state: &mut State) {
    if state.drawn {
        let mut stderr = std::io::stderr().lock();
        let _ = write!(stderr, "\r\x1b[2K");
        let _ = stderr.flush();
        state.drawn = false;
    }
}

fn draw(state: &mut State, style: Style) {
    let Some(label) = &state.label else { return };
    if !state.line_free {
        return;
    }
    state.frame = (state.frame + 1) % FRAMES.len();
    let seconds = state.since.elapsed().as_secs();
    let mut stderr = std::io::stderr().lock();
    let _ = write!(
        stderr,
        "\r\x1b[2K{} {}",
        style.cyan(FRAMES[state.frame]),
        style.dim(&format!("{label} ({seconds} s, Ctrl-C to abort)"))
    );
    let _ = stderr.flush();
    state.drawn = true;
}
