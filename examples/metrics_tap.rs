//! Metrics: a harness run recorded by the `harness-metrics` plugin and by a hand-written tap,
//! exposed as Prometheus text on 127.0.0.1.
//!
//! ```text
//! cargo run -p harness-examples --example metrics_tap             # serve once, print, exit
//! cargo run -p harness-examples --example metrics_tap -- --serve  # keep serving /metrics
//! ```
//!
//! The run is offline (the scripted model): two tool calls, one of which fails. Without
//! `--serve` the example scrapes its own endpoint once and prints what a Prometheus server
//! would receive.

use std::sync::Arc;

use harness_core::harness::{Harness, Mode};
use harness_core::model::{Scripted, ScriptedModel};
use harness_core::tool::{ToolError, tool_fn};
use harness_metrics::{DURATION_BUCKETS, Metrics, PrometheusHandle};
use harness_tags::tags::ObservationToolResult;
use harness_tags::{ObservationStep, ToolResultCtx};
use metrics_exporter_prometheus::PrometheusBuilder;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let serve = std::env::args().any(|arg| arg == "--serve");
    // One process-wide Prometheus recorder: the plugin and our own tap record into it.
    let recorder = PrometheusBuilder::new()
        .set_buckets(DURATION_BUCKETS)?
        .build_recorder();
    let prometheus = recorder.handle();
    metrics::set_global_recorder(recorder)?;

    let model = Arc::new(
        ScriptedModel::new("scripted/demo")
            .then(Scripted::tool_calls([
                ("read_file", json!({"path": "Cargo.toml"})),
                ("run_tests", json!({})),
            ]))
            .then(Scripted::text("The tests fail; Cargo.toml looks fine.")),
    );
    let harness = Harness::builder("metrics-demo")
        .mode(Mode::new("build").default_model("scripted/demo"))
        .model(Arc::clone(&model))
        .tool(tool_fn("read_file", "Reads a file.", |_: Value, _| async {
            Ok::<_, ToolError>("[package]\nname = \"demo\"")
        }))
        .tool(tool_fn(
            "run_tests",
            "Runs the tests.",
            |_: Value, _| async { Err::<String, _>(ToolError::new("2 tests failed")) },
        ))
        .plugin(Metrics::new())
        // The tap of the reference: record each tool's duration, by tool.
        .compose(|c| {
            c.tap(
                ObservationToolResult,
                |_: &ObservationStep, ctx: &ToolResultCtx| {
                    metrics::histogram!("tool.duration", "tool" => ctx.tool_name.clone())
                        .record(ctx.duration_ms as f64 / 1000.0);
                },
            )
        })
        .build()?;
    harness.init().await?;
    let summary = harness.send_message("Why does CI fail?").await?;
    println!("agent: {}", summary.final_text.unwrap_or_default());

    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    println!("serving http://{address}/metrics");
    let exposition = Exposition(prometheus);
    if serve {
        loop {
            let (connection, _) = listener.accept().await?;
            if let Err(error) = exposition.answer(connection).await {
                eprintln!("a scrape failed: {error}");
            }
        }
    }
    let server = tokio::spawn(async move {
        let (connection, _) = listener.accept().await?;
        exposition.answer(connection).await
    });
    let scraped = scrape(&address.to_string()).await?;
    server.await??;
    println!("{scraped}");
    let expected = [
        "harness_tool_calls_total{tool=\"read_file\",outcome=\"ok\"} 1",
        "harness_tool_calls_total{tool=\"run_tests\",outcome=\"error\"} 1",
        "tool_duration_count{tool=\"run_tests\"} 1",
        "harness_runs_total{outcome=\"complete\"} 1",
    ];
    for series in expected {
        if !scraped.contains(series) {
            return Err(format!("the exposition lacks `{series}`").into());
        }
    }
    harness.destroy().await;
    Ok(())
}

/// The recorder's text exposition.
struct Exposition(PrometheusHandle);

impl Exposition {
    /// Answers one HTTP request: the text exposition on `/metrics`, 404 elsewhere.
    async fn answer(&self, mut connection: TcpStream) -> std::io::Result<()> {
        let mut request = Vec::new();
        let mut buffer = [0u8; 1024];
        while !request.windows(4).any(|w| w == b"\r\n\r\n") {
            let read = connection.read(&mut buffer).await?;
            if read == 0 || request.len() > 16 * 1024 {
                break;
            }
            request.extend_from_slice(&buffer[..read]);
        }
        let wanted = request.starts_with(b"GET /metrics ");
        let (status, body) = if wanted {
            ("200 OK", self.0.render())
        } else {
            ("404 Not Found", "try /metrics\n".to_owned())
        };
        let response = format!(
            "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        connection.write_all(response.as_bytes()).await?;
        connection.shutdown().await
    }
}

/// `GET /metrics` over a plain TCP connection, as a scraper would.
async fn scrape(address: &str) -> std::io::Result<String> {
    let mut connection = TcpStream::connect(address).await?;
    let request = format!("GET /metrics HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    connection.write_all(request.as_bytes()).await?;
    let mut response = String::new();
    connection.read_to_string(&mut response).await?;
    Ok(response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or(response))
}
