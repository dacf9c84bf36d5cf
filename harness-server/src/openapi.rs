//! The server's OpenAPI document, generated from the handlers' and types' definitions; the
//! spec routes this server does not provide are in it too, answering `501`. Served at
//! `/openapi.json`; a copy is checked in as `harness-server/openapi.json`.

use std::sync::OnceLock;

use axum::http::header;
use axum::response::IntoResponse;
use utoipa::OpenApi;
use utoipa::openapi::path::{HttpMethod, OperationBuilder, ParameterBuilder, ParameterIn};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{ContentBuilder, Ref, Required, ResponseBuilder, ResponsesBuilder};

use crate::api::{execution, is_built, registry, sessions};
use crate::error::ErrorResponse;
use crate::routes::SPEC_ROUTES;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Open Harness API (harness-rs)",
        description = "The Open Harness API v0.2.0 as harness-server provides it. Operations this \
server does not provide answer 501 with the spec's error body.",
    ),
    paths(
        registry::list,
        registry::get_harness,
        registry::capabilities,
        registry::health,
        sessions::list,
        sessions::create,
        sessions::get_session,
        sessions::update,
        sessions::end,
        sessions::resume,
        sessions::history,
        sessions::fork,
        sessions::send_message,
        sessions::send_message_stream,
        execution::execute,
        execution::execute_stream,
        execution::list,
        execution::get_execution,
        execution::attach,
        execution::cancel,
        execution::result,
        execution::tool_calls,
        execution::send_input,
    ),
    components(schemas(ErrorResponse))
)]
struct Document;

/// The document.
pub fn document() -> utoipa::openapi::OpenApi {
    let mut document = Document::openapi();
    document.info.version = env!("CARGO_PKG_VERSION").to_owned();
    for route in SPEC_ROUTES.iter().filter(|route| !is_built(route)) {
        let path = format!("/v1{}", route.path);
        let mut operation = OperationBuilder::new()
            .operation_id(Some(route.id))
            .tag(route.group())
            .summary(Some(format!("{} (not provided: 501)", route.id)))
            .responses(
                ResponsesBuilder::new()
                    .response("401", error_response("No valid bearer token"))
                    .response("501", error_response("Not provided by this server"))
                    .build(),
            );
        for name in parameters(route.path) {
            operation = operation.parameter(
                ParameterBuilder::new()
                    .name(name)
                    .parameter_in(ParameterIn::Path)
                    .required(Required::True)
                    .schema(Some(
                        utoipa::openapi::ObjectBuilder::new()
                            .schema_type(utoipa::openapi::schema::Type::String),
                    )),
            );
        }
        document
            .paths
            .add_path_operation(path, vec![method(route.method)], operation.build());
    }
    let components = document.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        "bearer",
        SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
    );
    document.security = Some(vec![SecurityRequirement::new(
        "bearer",
        Vec::<String>::new(),
    )]);
    document
}

/// The document as pretty JSON, as served and checked in.
pub fn json() -> String {
    static JSON: OnceLock<String> = OnceLock::new();
    JSON.get_or_init(|| {
        let mut text = document()
            .to_pretty_json()
            .unwrap_or_else(|error| format!("{{\"error\": \"{error}\"}}"));
        text.push('\n');
        text
    })
    .clone()
}

pub(crate) async fn serve() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], json())
}

fn error_response(description: &str) -> utoipa::openapi::Response {
    ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("ErrorResponse")))
                .build(),
        )
        .build()
}

fn parameters(path: &str) -> impl Iterator<Item = &str> {
    path.split('/')
        .filter_map(|segment| segment.strip_prefix('{')?.strip_suffix('}'))
}

fn method(method: &str) -> HttpMethod {
    match method {
        "POST" => HttpMethod::Post,
        "PUT" => HttpMethod::Put,
        "PATCH" => HttpMethod::Patch,
        "DELETE" => HttpMethod::Delete,
        _ => HttpMethod::Get,
    }
}
