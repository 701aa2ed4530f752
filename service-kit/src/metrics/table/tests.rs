use super::*;

/// A state as a role's actor would hold it.
struct Counts {
    done: u64,
    ready: bool,
    started_at: Vec<(&'static str, Micros)>,
}

fn ages(s: &Counts, now: Micros) -> Vec<(String, f64)> {
    let age = |t: Micros| now.since(t).as_secs_f64();
    s.started_at
        .iter()
        .map(|(k, t)| ((*k).to_owned(), age(*t)))
        .collect()
}

const TABLE: &[Metric<Counts>] = &[
    Metric {
        name: "x_done_total",
        kind: "counter",
        help: "Things done.",
        read: Read::One(|s| s.done as f64),
    },
    Metric {
        name: "x_ready",
        kind: "gauge",
        help: "1 once ready.",
        read: Read::One(|s| f64::from(u8::from(s.ready))),
    },
    Metric {
        name: "x_age_seconds",
        kind: "gauge",
        help: "Age of each thing.",
        read: Read::By("thing", ages),
    },
];

#[test]
fn a_table_renders_as_the_calls_it_stands_for() {
    let state = Counts {
        done: 3,
        ready: true,
        started_at: vec![("a", Micros::from_secs(1)), ("b", Micros::from_secs(4))],
    };
    let now = Micros::from_secs(5);
    let mut table = Page::new();
    render(TABLE, &state, now, &mut table);
    let mut by_hand = Page::new();
    single(&mut by_hand, "x_done_total", "counter", "Things done.", 3.0);
    single(&mut by_hand, "x_ready", "gauge", "1 once ready.", 1.0);
    family(
        &mut by_hand,
        "x_age_seconds",
        "gauge",
        "Age of each thing.",
        "thing",
        &[("a".into(), 4.0), ("b".into(), 1.0)],
    );
    assert_eq!(table.encode(), by_hand.encode());
    assert!(table.encode().contains("x_age_seconds{thing=\"a\"} 4\n"));
}

#[test]
fn debug_shows_names_and_labels_not_pointers() {
    let shown = format!("{:?}", &TABLE[2]);
    assert!(shown.contains("x_age_seconds"), "{shown}");
    assert!(shown.contains("By(\"thing\")"), "{shown}");
}
