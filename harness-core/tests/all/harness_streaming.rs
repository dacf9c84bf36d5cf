#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Streaming costs what each delta adds: a long answer in small deltas allocates and prints
//! in proportion to the answer, never to the answer so far times the number of deltas.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use futures_util::stream::{self, StreamExt};
use harness_core::event::HarnessEvent;
use harness_core::model::{
    FinishReason, Model, ModelError, ModelId, ModelRequest, ModelStream, StreamEvent,
};
use harness_tags::KernelMessage;

use crate::allocations::counted;
use harness_tests::harness::builder_with;

const ANSWER_BYTES: usize = 1 << 20;
const DELTA_BYTES: usize = 8;
const DELTAS: usize = ANSWER_BYTES / DELTA_BYTES;

/// A model whose answer is `ANSWER_BYTES` of text in `DELTA_BYTES`-byte deltas.
struct LongAnswer {
    id: ModelId,
}

fn delta(index: usize) -> String {
    // Distinct deltas, so that a wrong order or a lost delta shows in the stored answer.
    format!("{:0width$}", index % 10_000_000, width = DELTA_BYTES)
}

#[async_trait]
impl Model for LongAnswer {
    fn id(&self) -> &ModelId {
        &self.id
    }

    async fn stream(&self, _request: &ModelRequest) -> Result<ModelStream, ModelError> {
        let deltas = (0..DELTAS).map(|index| Ok(StreamEvent::TextDelta(delta(index))));
        let finish = [Ok(StreamEvent::Finish(FinishReason::Stop))];
        Ok(stream::iter(deltas.chain(finish)).boxed())
    }
}

/// Counts what `--json` would print: one serialized envelope per line.
#[derive(Default)]
struct PrintedBytes(Arc<AtomicU64>);

impl Write for &PrintedBytes {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.fetch_add(buf.len() as u64, Ordering::Relaxed);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_one_megabyte_answer_in_small_deltas_costs_linear_memory_and_output() {
    let printed = Arc::new(PrintedBytes::default());
    let deltas_seen = Arc::new(AtomicU64::new(0));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let model = Arc::new(LongAnswer {
        id: ModelId::new("test/long-answer").unwrap(),
    });
    let harness = builder_with(model).build().unwrap();
    runtime.block_on(harness.init()).unwrap();
    let _printer = harness.listen({
        let printed = Arc::clone(&printed);
        let deltas_seen = Arc::clone(&deltas_seen);
        move |envelope| {
            if matches!(envelope.event, HarnessEvent::MessageDelta { .. }) {
                deltas_seen.fetch_add(1, Ordering::Relaxed);
            }
            serde_json::to_writer(&*printed, envelope).unwrap();
            (&*printed).write_all(b"\n").unwrap();
        }
    });

    // A current-thread runtime: the run, the recorder and the listeners all allocate here.
    let (summary, allocated) = counted(|| runtime.block_on(harness.send_message("go")));
    summary.unwrap();

    let messages = runtime.block_on(harness.list_messages(None)).unwrap();
    let answer = messages
        .iter()
        .find_map(|stored| match &stored.message {
            KernelMessage::Assistant { content, .. } => Some(content.clone()),
            _ => None,
        })
        .expect("the answer is stored");
    let expected: String = (0..DELTAS).map(delta).collect();
    assert!(
        answer == expected,
        "the stored answer is not the deltas in order"
    );
    assert_eq!(deltas_seen.load(Ordering::Relaxed), DELTAS as u64);

    // Linear bounds with room for framing: an event, its envelope and its JSON line per
    // delta, plus a few copies of the whole answer (stored, in the display state, in the
    // conversation). Copying the message so far on each delta would cost ~64 GB here.
    let printed = printed.0.load(Ordering::Relaxed);
    let per_delta_framing = 400;
    assert!(
        printed <= (DELTAS * per_delta_framing + 2 * ANSWER_BYTES) as u64,
        "printed {printed} bytes for a {ANSWER_BYTES}-byte answer in {DELTAS} deltas"
    );
    let per_delta_allocations = 3_000;
    assert!(
        allocated <= (DELTAS * per_delta_allocations + 16 * ANSWER_BYTES) as u64,
        "allocated {allocated} bytes for a {ANSWER_BYTES}-byte answer in {DELTAS} deltas"
    );
    eprintln!("printed {printed} B, allocated {allocated} B for {DELTAS} deltas");
}
