//! The table: every endpoint of every role, called with each kind of credential,
//! answers the expected status and never shows a credential.

use crate::calls::{call, short, Cred, LRA};
use crate::users::Work;
use common::protocol::{LmToGm, LmToWorker, WorkerToLm};
use tests::procs::{credentials, LoopbackCluster};

pub fn every_endpoint_answers_only_who_may_call(cluster: &LoopbackCluster, work: &Work) {
    use Cred::*;
    let c = credentials();
    let (gm0, gm1) = (&cluster.gms[0].url, &cluster.gms[1].url);
    let lm = &cluster.lms[0].url;
    let worker = &cluster.workers[0].url;
    let (job, lra_id) = (work.job, work.lra);
    // (role endpoint, method, url, body, bincode, [(credential, expected status)])
    let empty_reports = enc!(&Vec::<WorkerToLm>::new());
    let empty_orders = enc!(&Vec::<LmToWorker>::new());
    let empty_lm_msgs = enc!(&Vec::<LmToGm>::new());
    let garbage = b"\x00garbage".to_vec();
    let user_rows = |ok: u16, other: u16| {
        vec![
            (Nothing, 401),
            (WrongToken, 401),
            (Secret, 401),
            (User(c.bob.as_str()), other),
            (User(c.alice.as_str()), ok),
        ]
    };
    let internal_rows = |ok: u16| {
        vec![
            (Nothing, 401),
            (WrongSecret, 401),
            (User(c.admin.as_str()), 401),
            (Secret, ok),
        ]
    };
    let open_rows = || vec![(Nothing, 200), (WrongToken, 200), (WrongSecret, 200)];
    type Row<'a> = (&'a str, String, Vec<u8>, bool, Vec<(Cred<'a>, u16)>);
    let mut table: Vec<Row> = vec![
        (
            "POST",
            format!("{gm0}/v1/jobs"),
            short("a").into_bytes(),
            false,
            user_rows(202, 202),
        ),
        (
            "GET",
            format!("{gm0}/v1/jobs"),
            vec![],
            false,
            user_rows(200, 200),
        ),
        (
            "GET",
            format!("{gm0}/v1/jobs/{job}"),
            vec![],
            false,
            user_rows(200, 404),
        ),
        (
            "GET",
            format!("{gm0}/v1/tasks/{job}/0"),
            vec![],
            false,
            user_rows(200, 404),
        ),
        (
            "GET",
            format!("{gm0}/v1/pending"),
            vec![],
            false,
            user_rows(200, 200),
        ),
        (
            "GET",
            format!("{gm0}/v1/overview"),
            vec![],
            false,
            user_rows(200, 200),
        ),
        (
            "GET",
            format!("{gm0}/v1/cluster"),
            vec![],
            false,
            user_rows(200, 200),
        ),
        (
            "GET",
            format!("{gm0}/no-such-page"),
            vec![],
            false,
            vec![(Nothing, 401)],
        ),
        (
            "POST",
            format!("{gm0}/v1/lras"),
            LRA.as_bytes().to_vec(),
            false,
            user_rows(202, 202),
        ),
        (
            "GET",
            format!("{gm0}/v1/lras/{lra_id}"),
            vec![],
            false,
            user_rows(200, 404),
        ),
        (
            "GET",
            format!("{gm1}/v1/lras/{lra_id}"),
            vec![],
            false,
            user_rows(200, 404),
        ),
        (
            "POST",
            format!("{gm0}/v1/internal/messages"),
            empty_lm_msgs,
            true,
            internal_rows(200),
        ),
        (
            "POST",
            format!("{lm}/v1/messages"),
            garbage.clone(),
            true,
            internal_rows(400),
        ),
        (
            "POST",
            format!("{lm}/v1/worker/messages"),
            empty_reports,
            true,
            internal_rows(200),
        ),
        (
            "POST",
            format!("{lm}/v1/register"),
            garbage,
            true,
            internal_rows(400),
        ),
        (
            "POST",
            format!("{worker}/v1/messages"),
            empty_orders,
            true,
            // The cluster credential alone orders no worker: its LM's order key is
            // needed too (issue 32; services_worker_orders).
            internal_rows(403),
        ),
        (
            "GET",
            format!("{worker}/v1/tasks/{job}/0/logs"),
            vec![],
            false,
            internal_rows(404),
        ),
        (
            "GET",
            format!("{lm}/v1/no-such-route"),
            vec![],
            false,
            internal_rows(404),
        ),
    ];
    for url in [gm0, lm, worker] {
        for path in ["/healthz", "/metrics"] {
            table.push(("GET", format!("{url}{path}"), vec![], false, open_rows()));
        }
    }
    // The GM's OpenAPI document describes the API and holds nothing secret.
    table.push((
        "GET",
        format!("{gm0}/openapi.json"),
        vec![],
        false,
        open_rows(),
    ));
    // The dashboard's static files (they hold no data; see docs/dashboard.md).
    for path in ["/", "/dashboard.js", "/dashboard.css"] {
        table.push(("GET", format!("{gm0}{path}"), vec![], false, open_rows()));
    }
    let mut failures = Vec::new();
    for (method, url, body, bincode, rows) in &table {
        for (cred, expected) in rows {
            let (status, answer) = call(method, url, body, *bincode, *cred);
            if status != *expected {
                failures.push(format!(
                    "{method} {url} with {cred:?}: {status}, expected {expected}: {answer}"
                ));
            }
            for secret in [&c.secret, &c.admin, &c.alice, &c.bob] {
                assert!(
                    !answer.contains(secret.as_str()),
                    "{method} {url} shows a credential"
                );
            }
        }
    }
}
