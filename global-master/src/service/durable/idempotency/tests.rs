//! Unit tests of `idempotency.rs`.

use super::*;

fn job(n: u64, at: u64, body: &[u8]) -> Remembered {
    Remembered {
        body_sha256: body_sha256(body),
        job: JobId(n),
        tasks: 2,
        accepted_at: Micros(at),
    }
}

const S: u64 = 1_000_000;

#[test]
fn a_key_replays_its_job_refuses_another_body_and_is_per_user() {
    let ids = Idempotency::in_memory(Limits::default());
    let body = b"{\"tasks\":[]}";
    assert_eq!(
        ids.lookup("ann", "k1", body_sha256(body), Micros(S)),
        Lookup::Proceed
    );
    // A second request while the first is handled.
    assert_eq!(
        ids.lookup("ann", "k1", body_sha256(body), Micros(S)),
        Lookup::InFlight
    );
    ids.remember("ann", "k1", job(7, S, body));
    assert_eq!(
        ids.lookup("ann", "k1", body_sha256(body), Micros(2 * S)),
        Lookup::Replay(job(7, S, body))
    );
    assert_eq!(
        ids.lookup("ann", "k1", body_sha256(b"other"), Micros(2 * S)),
        Lookup::Mismatch
    );
    // Another user's same key is another key.
    assert_eq!(
        ids.lookup("bob", "k1", body_sha256(body), Micros(2 * S)),
        Lookup::Proceed
    );
    // A refused request frees its key for a retry.
    ids.release("bob", "k1");
    assert_eq!(
        ids.lookup("bob", "k1", body_sha256(body), Micros(2 * S)),
        Lookup::Proceed
    );
}

#[test]
fn keys_expire_after_the_ttl_and_the_oldest_go_beyond_the_count() {
    let limits = Limits {
        ttl: Duration::from_secs(10),
        max_keys: 2,
    };
    let ids = Idempotency::in_memory(limits);
    for (i, key) in ["a", "b", "c"].iter().enumerate() {
        let at = (i as u64 + 1) * S;
        assert_eq!(
            ids.lookup("u", key, body_sha256(b"x"), Micros(at)),
            Lookup::Proceed
        );
        ids.remember("u", key, job(i as u64, at, b"x"));
    }
    assert_eq!(ids.len(), 2, "bounded by count");
    assert_eq!(
        ids.lookup("u", "a", body_sha256(b"x"), Micros(4 * S)),
        Lookup::Proceed
    );
    ids.release("u", "a");
    assert!(matches!(
        ids.lookup("u", "c", body_sha256(b"x"), Micros(12 * S)),
        Lookup::Replay(_)
    ));
    // b was accepted at 2 s: gone at 12 s; c (3 s) too at 13 s.
    assert_eq!(ids.len(), 1);
    assert_eq!(
        ids.lookup("u", "c", body_sha256(b"x"), Micros(13 * S)),
        Lookup::Proceed
    );
    assert!(ids.is_empty());
}

#[test]
fn keys_survive_a_restart_on_the_same_data_dir_and_refuse_another_cluster() {
    let dir = std::env::temp_dir().join(format!("megha-idem-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cluster = ClusterName::default();
    {
        let ids = Idempotency::open(&dir, &cluster, Limits::default(), Micros(S)).unwrap();
        assert_eq!(
            ids.lookup("u", "k", body_sha256(b"x"), Micros(S)),
            Lookup::Proceed
        );
        ids.remember("u", "k", job(42, S, b"x"));
    }
    let ids = Idempotency::open(&dir, &cluster, Limits::default(), Micros(2 * S)).unwrap();
    assert_eq!(
        ids.lookup("u", "k", body_sha256(b"x"), Micros(2 * S)),
        Lookup::Replay(job(42, S, b"x"))
    );
    drop(ids);
    // Expired by the time of the next start: gone, from the file too.
    let short = Limits {
        ttl: Duration::from_secs(1),
        max_keys: 10,
    };
    let ids = Idempotency::open(&dir, &cluster, short, Micros(5 * S)).unwrap();
    assert!(ids.is_empty());
    drop(ids);
    let blue = ClusterName::new("blue").unwrap();
    {
        let ids = Idempotency::open(&dir, &cluster, Limits::default(), Micros(S)).unwrap();
        ids.lookup("u", "k2", body_sha256(b"x"), Micros(S));
        ids.remember("u", "k2", job(1, S, b"x"));
    }
    let e = Idempotency::open(&dir, &blue, Limits::default(), Micros(S)).unwrap_err();
    assert!(e.to_string().contains("`blue`"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn keys_are_checked() {
    assert!(check_key(b"3f2c-uuid").is_ok());
    assert!(check_key(b"").is_err());
    assert!(check_key(b"has space").is_err());
    assert!(check_key(&[b'a'; 256]).is_err());
}

/// A GM killed after its journal took a job but before the key store took the job's
/// key: the key, journalled with the job, is taken back at the next start, so a
/// retried submission replays the job instead of making a second one. A key the
/// store has is left as it is.
#[test]
fn keys_missing_from_the_store_are_restored_from_the_journal() {
    let dir = std::env::temp_dir().join(format!("megha-idem-restore-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cluster = ClusterName::default();
    {
        let ids = Idempotency::open(&dir, &cluster, Limits::default(), Micros(S)).unwrap();
        ids.lookup("u", "kept", body_sha256(b"x"), Micros(S));
        ids.remember("u", "kept", job(1, S, b"x"));
        // "lost" is reserved, its job journalled, and the GM dies before `settle`.
        let reserved = ids.lookup("u", "lost", body_sha256(b"y"), Micros(S));
        assert_eq!(reserved, Lookup::Proceed);
    }
    let ids = Idempotency::open(&dir, &cluster, Limits::default(), Micros(2 * S)).unwrap();
    let key_of = |key: &str, body: &[u8]| KeyOf {
        user: "u".into(),
        key: key.into(),
        body_sha256: body_sha256(body),
    };
    let journalled = vec![
        (key_of("kept", b"x"), job(99, S, b"x")),
        (key_of("lost", b"y"), job(2, S, b"y")),
    ];
    assert_eq!(ids.restore(journalled), 1);
    assert_eq!(
        ids.lookup("u", "lost", body_sha256(b"y"), Micros(2 * S)),
        Lookup::Replay(job(2, S, b"y"))
    );
    assert_eq!(
        ids.lookup("u", "kept", body_sha256(b"x"), Micros(2 * S)),
        Lookup::Replay(job(1, S, b"x")),
        "a key the store had keeps its job"
    );
    drop(ids);
    // Restored keys are durable too.
    let ids = Idempotency::open(&dir, &cluster, Limits::default(), Micros(3 * S)).unwrap();
    assert_eq!(
        ids.lookup("u", "lost", body_sha256(b"y"), Micros(3 * S)),
        Lookup::Replay(job(2, S, b"y"))
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 33: a reservation dropped unsettled (its handler went away) releases its
/// key with a count, so a retry proceeds instead of a 409 "being handled" for good;
/// a settled one is remembered and replayed.
#[test]
fn a_reservation_dropped_unsettled_releases_its_key() {
    let ids = std::sync::Arc::new(Idempotency::in_memory(Limits::default()));
    let mut headers = HeaderMap::new();
    headers.insert(HEADER, HeaderValue::from_static("k1"));
    let body = b"{\"tasks\":[]}";
    let r = ids
        .before_submit(&headers, "ann", body, Micros(S))
        .expect("proceed")
        .expect("a reservation");
    assert!(ids.before_submit(&headers, "ann", body, Micros(S)).is_err());
    drop(r);
    assert_eq!(ids.dropped_unsettled(), 1);
    let r = ids
        .before_submit(&headers, "ann", body, Micros(S))
        .expect("the key was released")
        .expect("a reservation");
    r.settle(Some((JobId(9), 1, Micros(S))));
    assert_eq!(ids.dropped_unsettled(), 1, "a settled one is not counted");
    let replay = ids
        .before_submit(&headers, "ann", body, Micros(S))
        .unwrap_err();
    assert_eq!(replay.status(), StatusCode::ACCEPTED);
}
