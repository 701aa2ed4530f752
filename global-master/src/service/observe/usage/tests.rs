use super::*;

const HOUR_US: u64 = BUCKET_SECONDS * 1_000_000;

fn query(user: Option<&str>, queue: Option<&str>, since: u64, until: u64) -> UsageQuery {
    UsageQuery {
        user: user.map(str::to_owned),
        queue: queue.map(str::to_owned),
        since,
        until,
    }
}

#[test]
fn runs_are_charged_reserved_resources_times_their_run_time() {
    let mut l = Ledger::default();
    let (a, b, c) = (TaskId::new(1, 0), TaskId::new(1, 1), TaskId::new(2, 0));
    l.book(a, Some("alice"), "batch", Resources::new(500, 64));
    l.book(b, Some("alice"), "batch", Resources::new(2000, 1024));
    l.book(c, Some("bob"), "prod", Resources::new(1000, 128));
    // a: 2 s then (retried) 3 s; b: 1.5 s; c: 10 s, in the next hour.
    let now = Micros(10 * HOUR_US + 5);
    let measured = |cpu_us, peak| {
        Some(RunUsage {
            cpu_us,
            memory_peak_mb: peak,
        })
    };
    assert!(l
        .charge(now, a, Micros(2_000_000), measured(1_200_000, Some(40)))
        .is_some());
    let (key, totals) = l
        .charge(now, a, Micros(3_000_000), measured(300_000, None))
        .expect("booked");
    assert_eq!(key, (10 * BUCKET_SECONDS, "alice".into(), "batch".into()));
    assert_eq!(totals.runs, 1);
    l.close(a);
    l.charge(now, b, Micros(1_500_000), measured(2_500_000, Some(900)));
    l.charge(Micros(11 * HOUR_US), c, Micros(10_000_000), None);
    let (all, total) = l.query(&query(None, None, 0, u64::MAX));
    assert_eq!((total.user.as_str(), total.runs), ("*", 4));
    assert_eq!(total.cpu_seconds_reserved, 15.5);
    assert_eq!(
        all,
        vec![
            UsageLine {
                user: "alice".into(),
                queue: "batch".into(),
                runs: 3,
                wall_seconds: 6.5,
                // 0.5 core x 5 s + 2 cores x 1.5 s
                cpu_seconds_reserved: 5.5,
                // 64 MiB x 5 s + 1024 MiB x 1.5 s
                memory_mb_seconds_reserved: 1856.0,
                // 1.2 s + 0.3 s + 2.5 s; the highest peak.
                runs_measured: 3,
                cpu_seconds_used: 4.0,
                memory_peak_mb: Some(900),
            },
            UsageLine {
                user: "bob".into(),
                queue: "prod".into(),
                runs: 1,
                wall_seconds: 10.0,
                cpu_seconds_reserved: 10.0,
                memory_mb_seconds_reserved: 1280.0,
                // Not measured (a synthetic task): nothing claimed.
                runs_measured: 0,
                cpu_seconds_used: 0.0,
                memory_peak_mb: None,
            },
        ]
    );
    // By user, by queue, by time (the hour a run ended in).
    assert_eq!(l.query(&query(Some("bob"), None, 0, u64::MAX)).0.len(), 1);
    assert_eq!(
        l.query(&query(None, Some("batch"), 0, u64::MAX)).0[0].user,
        "alice"
    );
    let early = l.query(&query(None, None, 0, 11 * BUCKET_SECONDS)).0;
    assert_eq!(early.len(), 1);
    assert_eq!(early[0].user, "alice");
    let late = l
        .query(&query(None, None, 11 * BUCKET_SECONDS + 10, u64::MAX))
        .0;
    assert_eq!(
        late.len(),
        1,
        "an hour counts when the range starts inside it"
    );
    assert_eq!(late[0].user, "bob");
    // A closed task is charged no more (a late repeat), and counted.
    assert!(l.charge(now, a, Micros(1), None).is_none());
    assert_eq!(l.unbooked, 1);
    // Per queue since the start, for the metrics.
    let per_queue: Vec<_> = l.per_queue().map(|(q, t)| (q.to_owned(), t.runs)).collect();
    assert_eq!(per_queue, vec![("batch".into(), 3), ("prod".into(), 1)]);
}

#[test]
fn old_hours_expire_and_rows_are_bounded() {
    let mut l = Ledger::default();
    let t = TaskId::new(1, 0);
    l.book(t, None, "q", Resources::new(1000, 1));
    l.charge(Micros(HOUR_US), t, Micros(1_000_000), None);
    l.charge(Micros(3000 * HOUR_US), t, Micros(1_000_000), None);
    l.expire(Micros(3000 * HOUR_US));
    let left = l.query(&query(None, None, 0, u64::MAX)).0;
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].runs, 1, "the hour older than the retention left");
    assert_eq!(left[0].user, NO_USER);
    for hour in 0..(MAX_ROWS as u64 + 10) {
        l.add((hour, "u".into(), "q".into()), Totals::default());
    }
    assert_eq!(l.rows.len(), MAX_ROWS);
}

#[test]
fn bookings_of_tasks_that_ended_uncharged_are_pruned() {
    let mut l = Ledger::default();
    for i in 0..3000 {
        l.book(TaskId::new(i, 0), None, "q", Resources::new(1, 1));
    }
    l.prune(|t| t.job.0 < 10);
    assert_eq!(l.bookings.len(), 10);
}
