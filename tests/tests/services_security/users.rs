//! Users and queues: a user submits to her own queues only, sees her own work
//! only (another user's job answers like a missing one), and a user added to the
//! tokens file is known after SIGHUP.

use crate::calls::{call, json, short, Cred, LRA};
use std::time::Duration;
use tests::procs::{credentials, wait_until, LoopbackCluster};

/// What alice submitted: a job (finished) and an LRA.
pub struct Work {
    pub job: u64,
    pub lra: u64,
}

/// Alice may not use queue b; in queue a her job runs (on the registered worker:
/// the slot takeover failed) and her LRA is accepted.
pub fn alice_submits_to_her_queue(cluster: &LoopbackCluster) -> Work {
    let c = credentials();
    let (gm0, gm1) = (&cluster.gms[0].url, &cluster.gms[1].url);
    let (status, answer) = call(
        "POST",
        &format!("{gm1}/v1/jobs"),
        short("b").as_bytes(),
        false,
        Cred::User(&c.alice),
    );
    assert_eq!(status, 403, "alice may not use queue b: {answer}");
    assert_eq!(json(&answer)["field"], "tasks[0].queue");
    let (status, answer) = call(
        "POST",
        &format!("{gm0}/v1/jobs"),
        short("a").as_bytes(),
        false,
        Cred::User(&c.alice),
    );
    assert_eq!(status, 202, "{answer}");
    let job = json(&answer)["job"].as_u64().expect("job id");
    let (status, answer) = call(
        "POST",
        &format!("{gm0}/v1/lras"),
        LRA.as_bytes(),
        false,
        Cred::User(&c.alice),
    );
    assert_eq!(status, 202, "{answer}");
    let lra_id = json(&answer)["lra"].as_u64().expect("lra id");
    // The slot takeover failed: alice's task runs on the registered worker.
    wait_until("alice's job finished", Duration::from_secs(30), || {
        let (_, body) = call(
            "GET",
            &format!("{gm0}/v1/jobs/{job}"),
            b"",
            false,
            Cred::User(&c.alice),
        );
        json(&body)["state"] == "finished"
    });
    Work { job, lra: lra_id }
}

/// The overview, a job and the job list show a user's own jobs only; another
/// user's job answers exactly like a missing one.
pub fn a_users_jobs_stay_hidden_from_others(cluster: &LoopbackCluster, job: u64) {
    use Cred::User;
    let c = credentials();
    let gm0 = &cluster.gms[0].url;
    let no_such_job = job + 1_000_000;

    // The dashboard's overview lists a user's own jobs only.
    let overview_jobs = |who: &str| -> Vec<u64> {
        let (_, body) = call("GET", &format!("{gm0}/v1/overview"), b"", false, User(who));
        json(&body)["jobs"]
            .as_array()
            .map(|jobs| jobs.iter().filter_map(|j| j["job"].as_u64()).collect())
            .unwrap_or_default()
    };
    assert!(overview_jobs(&c.alice).contains(&job), "alice sees her job");
    assert!(
        !overview_jobs(&c.bob).contains(&job),
        "bob does not see alice's job"
    );

    // Another user's job answers exactly like a missing one.
    let (_, theirs) = call(
        "GET",
        &format!("{gm0}/v1/jobs/{job}"),
        b"",
        false,
        User(&c.bob),
    );
    let (_, missing) = call(
        "GET",
        &format!("{gm0}/v1/jobs/{no_such_job}"),
        b"",
        false,
        User(&c.bob),
    );
    assert_eq!(
        theirs.replace(&job.to_string(), "N"),
        missing.replace(&no_such_job.to_string(), "N")
    );
    // Bob's list holds none of alice's jobs; the admin's holds them.
    let listed = |t: &str| -> Vec<u64> {
        let (_, b) = call("GET", &format!("{gm0}/v1/jobs"), b"", false, User(t));
        json(&b)["jobs"]
            .as_array()
            .expect("jobs")
            .iter()
            .filter_map(|j| j["job"].as_u64())
            .collect()
    };
    assert!(!listed(&c.bob).contains(&job));
}

/// A new user in the tokens file works after SIGHUP (or the GM's next look at the
/// file); until then the token is unknown.
pub fn a_new_token_works_after_sighup(cluster: &LoopbackCluster) {
    use Cred::User;
    let c = credentials();
    let gm0 = &cluster.gms[0].url;
    // A new user in the tokens file works after SIGHUP (or the GM's next look at
    // the file); until then the token is unknown.
    let carol = format!("carol-{}", "c".repeat(20));
    let (status, _) = call("GET", &format!("{gm0}/v1/jobs"), b"", false, User(&carol));
    assert_eq!(status, 401);
    let mut tokens = std::fs::read_to_string(&c.tokens_file).expect("tokens");
    tokens.push_str(&format!(
        "\n[[users]]\nname = \"carol\"\ntoken = \"{carol}\"\nqueues = [\"b\"]\n"
    ));
    std::fs::write(&c.tokens_file, tokens).expect("write tokens");
    std::process::Command::new("kill")
        .args(["-HUP", &cluster.gms[0].pid().to_string()])
        .status()
        .expect("kill -HUP");
    wait_until("carol's token to work", Duration::from_secs(10), || {
        call("GET", &format!("{gm0}/v1/jobs"), b"", false, User(&carol)).0 == 200
    });
    let (status, _) = call(
        "POST",
        &format!("{gm0}/v1/jobs"),
        short("a").as_bytes(),
        false,
        User(&carol),
    );
    assert_eq!(status, 403, "carol may use queue b only");
    assert!(cluster.metric(&cluster.gms[..1], "megha_gm_tokens_reloads_total") >= 1.0);
}
