use super::*;
use std::collections::BTreeSet;

/// `(path, METHOD)` of every route `router` serves, read from its `Debug` text
/// (axum offers no other way to list a router's routes): each `RouteId(n)` of the
/// path router has a path (`RouteId(n): "/v1/jobs"`) and an `allow_header` listing
/// its methods. Panics if the text no longer has that shape, so a new axum that
/// formats it differently fails this test loudly instead of passing it empty.
fn served_routes<S>(router: &axum::Router<S>) -> BTreeSet<(String, String)> {
    let text = format!("{router:?}");
    let paths_router = text.split("fallback_router").next().expect("a path router");
    let (routes, paths) = paths_router
        .split_once("node: Node")
        .expect("axum's Router Debug names its `node`");
    let id_after = |s: &str| -> Option<u32> { s.split(')').next()?.trim().parse().ok() };
    let mut path_of = std::collections::HashMap::new();
    for part in paths.split("RouteId(").skip(1) {
        let id = id_after(part).expect("a route id");
        let path = part.split('"').nth(1).expect("a quoted path");
        path_of.insert(id, path.to_owned());
    }
    let mut served = BTreeSet::new();
    for part in routes.split("RouteId(").skip(1) {
        let id = id_after(part).expect("a route id");
        let allow = part
            .split("allow_header: Bytes(b\"")
            .nth(1)
            .and_then(|a| a.split('"').next())
            .expect("each route lists its methods in `allow_header`");
        let path = path_of.get(&id).expect("every route id has a path");
        for method in allow.split(',').filter(|m| *m != "HEAD") {
            served.insert((path.clone(), method.to_owned()));
        }
    }
    assert!(
        served.len() >= 10,
        "read only {served:?} from the router's Debug text: did its format change?\n{text}"
    );
    served
}

fn document_json() -> serde_json::Value {
    serde_json::from_str(document()).expect("the OpenAPI document is JSON")
}

#[test]
fn the_document_lists_every_public_route_the_router_serves() {
    let doc = document_json();
    let mut documented = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, _) in item.as_object().expect("path item") {
            documented.insert((path.clone(), method.to_uppercase()));
        }
    }
    let served: BTreeSet<_> = served_routes(&crate::service::http::routes())
        .into_iter()
        .filter(|(path, _)| !INTERNAL_PATHS.contains(&path.as_str()))
        .collect();
    let undocumented: Vec<_> = served.difference(&documented).collect();
    assert!(
        undocumented.is_empty(),
        "routes served without an OpenAPI entry (add #[utoipa::path] and list the handler in GmApi, or INTERNAL_PATHS): {undocumented:?}"
    );
    let unserved: Vec<_> = documented.difference(&served).collect();
    assert!(
        unserved.is_empty(),
        "documented but not served: {unserved:?}"
    );
}

#[test]
fn the_document_is_openapi_3_with_bearer_auth_on_user_routes_only() {
    let doc = document_json();
    assert!(
        doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.")),
        "{}",
        doc["openapi"]
    );
    let scheme = &doc["components"]["securitySchemes"]["bearer"];
    assert_eq!(scheme["type"], "http");
    assert_eq!(scheme["scheme"], "bearer");
    assert_eq!(doc["security"], serde_json::json!([{"bearer": []}]));
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("path item") {
            let open = service_kit::auth::OPEN_PATHS.contains(&path.as_str()) || path == PATH;
            // An operation's own `security: []` lifts the document's bearer scheme.
            assert_eq!(
                op.get("security") == Some(&serde_json::json!([{}]))
                    || op.get("security") == Some(&serde_json::json!([])),
                open,
                "{method} {path}: security {:?}",
                op.get("security")
            );
            let responses = op["responses"].as_object().expect("responses");
            for (status, r) in responses {
                assert!(
                    r["content"].as_object().is_some_and(|c| !c.is_empty()),
                    "{method} {path} {status}: every answer has a body schema"
                );
            }
            if !open {
                assert!(
                    responses.contains_key("401"),
                    "{method} {path}: a guarded route documents 401"
                );
            }
        }
    }
    // Links in OpenAPI's spelling (see `camel_case_links`), to operations that exist.
    let ids: BTreeSet<&str> = doc["paths"]
        .as_object()
        .expect("paths")
        .values()
        .flat_map(|item| item.as_object().expect("item").values())
        .filter_map(|op| op["operationId"].as_str())
        .collect();
    let links = &doc["paths"]["/v1/jobs"]["post"]["responses"]["202"]["links"];
    for (name, link) in links.as_object().expect("submit links") {
        let target = link["operationId"].as_str().expect("operationId");
        assert!(ids.contains(target), "link {name} -> {target}");
        assert!(link.get("operation_id").is_none(), "{link}");
    }
    // The schemas come from the types: a submission's task, with its required fields
    // and no others.
    let task = &doc["components"]["schemas"]["TaskRequest"];
    assert_eq!(task["additionalProperties"], false, "{task}");
    let required: Vec<&str> = task["required"]
        .as_array()
        .expect("required")
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert_eq!(required, ["resources"], "{task}");
}

#[test]
#[ignore = "prints the document"]
fn print_document() {
    println!("{}", document());
}
