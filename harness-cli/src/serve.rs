//! `harness serve`: the Open Harness API over HTTP, one harness per session built from the
//! same flags and configuration as `harness run`.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use harness_core::store::Store;
use harness_server::{Server, ServerConfig, ServerLogs};

use crate::CliError;
use crate::args::{Global, ServeArgs};
use crate::config::Settings;
use crate::setup::Parts;

/// The variable a token is read from when `--token` is not given.
pub const TOKEN_VAR: &str = "HARNESS_SERVER_TOKEN";

/// Serves until Ctrl-C.
pub async fn serve(global: &Global, args: ServeArgs) -> Result<ExitCode, CliError> {
    let bind: SocketAddr = args.bind.parse().map_err(|_| {
        CliError::Usage(format!(
            "--bind takes an address and port such as 127.0.0.1:7878, not `{}`",
            args.bind
        ))
    })?;
    let given = args
        .token
        .clone()
        .or_else(|| std::env::var(TOKEN_VAR).ok())
        .filter(|token| !token.is_empty());
    let (token, generated) = match given {
        Some(token) => (token, false),
        None if bind.ip().is_loopback() => {
            let token = harness_server::random_secret().map_err(|source| CliError::Io {
                what: "cannot generate a token".to_owned(),
                source,
            })?;
            (token, true)
        }
        None => {
            return Err(CliError::Usage(format!(
                "serving on {bind}, beyond this machine, needs a token: pass --token or set \
                 {TOKEN_VAR}"
            )));
        }
    };
    // Installed first, so that what loading the configuration logs is kept too.
    let logs = ServerLogs::default();
    if tracing::subscriber::set_global_default(logs.subscriber()).is_err() {
        eprintln!("harness: another logger is installed; GET /logs will stay empty");
    }
    let settings = Settings::load(global.config.as_deref())?;
    let parts = Arc::new(Parts::load(
        settings,
        global,
        &args.model,
        crate::demo_pace(false),
    )?);
    let store: Arc<dyn Store> = Arc::new(parts.store.clone());
    let factory = {
        let parts = Arc::clone(&parts);
        Arc::new(move || parts.session_builder().map_err(|error| error.to_string()))
    };
    let mut config = ServerConfig::new(token.clone());
    config.cors_origins = args.cors_origins.clone();
    config.input_timeout = Duration::from_secs(args.input_timeout);
    config.loopback_callbacks = args.allow_loopback_callbacks;
    config.command_tools = args.allow_command_tools;
    config.workspace = Some(parts.workspace.root().to_path_buf());
    config.logs = logs;
    config.mcp_servers = parts.mcp_servers()?;
    let server = Server::new(config, store, factory).await?;
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .map_err(|source| CliError::Io {
            what: format!("cannot listen on {bind}"),
            source,
        })?;
    let address = listener.local_addr().map_err(|source| CliError::Io {
        what: "cannot read the address listened on".to_owned(),
        source,
    })?;
    eprintln!("harness: serving http://{address}/v1/harnesses/local (API at /openapi.json)");
    if generated {
        // Printed once, on standard output, so that a script can read it.
        println!("token: {token}");
    }
    server
        .serve(listener, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(ExitCode::SUCCESS)
}
