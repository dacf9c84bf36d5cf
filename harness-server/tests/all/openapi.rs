//! The checked-in OpenAPI document is the one the server serves.

#[test]
fn the_checked_in_document_is_current() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.json");
    let current = harness_server::openapi::json("local");
    if std::env::var_os("UPDATE_OPENAPI").is_some() {
        std::fs::write(path, &current).unwrap();
    }
    let checked_in = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        checked_in == current,
        "harness-server/openapi.json is stale: run `UPDATE_OPENAPI=1 cargo test -p \
         harness-server --test all openapi` and commit it"
    );
}

#[test]
fn the_document_lists_every_spec_route() {
    let document: serde_json::Value =
        serde_json::from_str(&harness_server::openapi::json("local")).unwrap();
    for route in harness_server::SPEC_ROUTES {
        let operation =
            &document["paths"][format!("/v1{}", route.path)][route.method.to_ascii_lowercase()];
        assert_eq!(operation["operationId"], route.id, "{}", route.id);
        assert!(operation["responses"]["401"].is_object(), "{}", route.id);
    }
}
