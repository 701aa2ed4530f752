//! Issue 32: a user acts only on their own jobs, whatever form the ids take. Every
//! route of the GM's OpenAPI document that names a job (`{id}`, `{job}`, with
//! `{index}`) is called as bob on alice's job with the raw id, its percent-encoded
//! digits, a leading zero, a `+` sign (raw and encoded), and the same forms of the
//! task index: each answers exactly like a job that does not exist (404, the same
//! body), and alice's job is left as it was.

use crate::calls::{call_as, json, submit_as, Cred};
use crate::users::Work;
use std::time::Duration;
use tests::procs::{credentials, wait_until, LoopbackCluster};

/// The forms of a decimal id that a handler decoding the path reads as the same
/// number.
fn forms(id: u64) -> Vec<String> {
    let raw = id.to_string();
    let encoded: String = raw.bytes().map(|b| format!("%{b:02X}")).collect();
    let first_encoded = format!("%{:02x}{}", raw.as_bytes()[0], &raw[1..]);
    vec![
        raw.clone(),
        encoded,
        first_encoded,
        format!("0{raw}"),
        format!("%30{raw}"),
        format!("+{raw}"),
        format!("%2B{raw}"),
    ]
}

pub fn every_route_naming_a_job_hides_other_users_jobs(cluster: &LoopbackCluster, work: &Work) {
    let c = credentials();
    let gm0 = &cluster.gms[0].url;
    let (status, doc) = call_as("GET", &format!("{gm0}/openapi.json"), Cred::Nothing);
    assert_eq!(status, 200, "{doc}");
    let doc = json(&doc);
    let mut walked = 0;
    for (path, item) in doc["paths"].as_object().expect("the document has paths") {
        if !path.contains('{') {
            continue;
        }
        // Routes naming an LM's node, not a job (admin only: the table checks who
        // may call them).
        let names_a_job = path.contains("{id}") || path.contains("{job}");
        if !names_a_job
            && path
                .replace("{lm}", "")
                .replace("{node}", "")
                .find('{')
                .is_none()
        {
            continue;
        }
        for method in item.as_object().expect("a path item").keys() {
            let method = method.to_uppercase();
            // The id of alice's work this route names, and an id nobody has.
            let (own, missing) = if path.starts_with("/v1/lras/") {
                (work.lra, work.lra + 1_000_000)
            } else {
                (work.job, work.job + 1_000_000)
            };
            let index_forms = ["0", "%30", "00", "+0"];
            let mut cases = Vec::new();
            for (n, id_form) in forms(own).into_iter().enumerate() {
                let missing_form = forms(missing)[n].clone();
                let index = index_forms[n % index_forms.len()];
                let fill = |id: &str| {
                    path.replace("{id}", id)
                        .replace("{job}", id)
                        .replace("{index}", index)
                };
                cases.push((fill(&id_form), fill(&missing_form)));
            }
            assert!(
                !cases.iter().any(|(p, _)| p.contains('{')),
                "{method} {path}: a path parameter this test does not know; add it here"
            );
            for (theirs, nobodys) in cases {
                let (status, body) =
                    call_as(&method, &format!("{gm0}{theirs}"), Cred::User(&c.bob));
                let (missing_status, missing_body) =
                    call_as(&method, &format!("{gm0}{nobodys}"), Cred::User(&c.bob));
                assert_eq!(
                    status, 404,
                    "bob's {method} {theirs} on alice's work answered {status}: {body}"
                );
                assert_eq!(missing_status, 404, "{method} {nobodys}: {missing_body}");
                assert_eq!(
                    body.replace(&own.to_string(), "N"),
                    missing_body.replace(&missing.to_string(), "N"),
                    "bob's {method} {theirs} answers unlike a missing job"
                );
                walked += 1;
            }
        }
    }
    assert!(
        walked >= 5 * forms(1).len(),
        "walked only {walked} calls: the document lost routes naming a job?"
    );
    // Alice's job is as it was: not cancelled by any of bob's DELETEs, still hers.
    let (status, body) = call_as(
        "GET",
        &format!("{gm0}/v1/jobs/{}", work.job),
        Cred::User(&c.alice),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(json(&body)["state"], "finished", "{body}");
}

/// `/v1/cluster` relays the LMs' node lists: a user sees there the tasks of their
/// own jobs only (the load of each node, not which jobs of others run there).
pub fn the_cluster_view_shows_a_user_only_their_tasks(cluster: &LoopbackCluster) {
    let c = credentials();
    let gm0 = &cluster.gms[0].url;
    let long = r#"{"tasks":[{"queue":"a","resources":{"cpu_millis":100,"memory_mb":1},"duration_ms":60000}]}"#;
    let job = submit_as(gm0, long, Cred::User(&c.alice));
    let task = format!("\"{job}.0\"");
    let view = |who: &str| call_as("GET", &format!("{gm0}/v1/cluster"), Cred::User(who)).1;
    wait_until(
        "alice's long task on a node",
        Duration::from_secs(30),
        || view(&c.admin).contains(&task),
    );
    assert!(view(&c.alice).contains(&task), "alice sees her task");
    let bobs = view(&c.bob);
    assert!(!bobs.contains(&task), "bob sees alice's task: {bobs}");
    assert!(
        bobs.contains("\"nodes\""),
        "bob still sees the nodes: {bobs}"
    );
    let (status, answer) = call_as(
        "DELETE",
        &format!("{gm0}/v1/jobs/{job}"),
        Cred::User(&c.alice),
    );
    assert_eq!(status, 202, "{answer}");
}
