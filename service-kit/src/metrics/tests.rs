use super::*;

#[test]
fn histogram_is_cumulative_with_sum_and_count() {
    let h = Histogram::latency("x_seconds", "help").unwrap();
    h.observe(0.0001);
    h.observe(0.003);
    h.observe(100.0);
    h.observe(f64::NAN);
    let mut page = Page::new();
    page.histogram(&h);
    let out = page.encode();
    assert!(out.contains("# TYPE x_seconds histogram\n"), "{out}");
    assert!(out.contains("x_seconds_bucket{le=\"0.0005\"} 1\n"), "{out}");
    assert!(out.contains("x_seconds_bucket{le=\"0.005\"} 2\n"), "{out}");
    assert!(out.contains("x_seconds_bucket{le=\"60\"} 2\n"), "{out}");
    assert!(out.contains("x_seconds_bucket{le=\"+Inf\"} 3\n"), "{out}");
    assert!(out.contains("x_seconds_count 3\n"), "{out}");
    assert_eq!(h.count(), 3);
}

#[test]
fn families_have_help_type_and_escaped_label_values() {
    let mut page = Page::new();
    single(&mut page, "a_total", "counter", "Things \\ counted.", 7.0);
    family(
        &mut page,
        "q_length",
        "gauge",
        "Per queue.",
        "queue",
        &[("we\"ird".into(), 2.0), ("plain".into(), f64::INFINITY)],
    );
    let out = page.encode();
    assert!(
        out.contains("# HELP a_total Things \\\\ counted.\n"),
        "{out}"
    );
    assert!(out.contains("# TYPE a_total counter\na_total 7\n"), "{out}");
    assert!(out.contains("# TYPE q_length gauge\n"), "{out}");
    assert!(out.contains("q_length{queue=\"we\\\"ird\"} 2\n"), "{out}");
    // The crate writes `inf`, which Prometheus and promtool parse (Go's ParseFloat).
    assert_eq!(sum(&out, "q_length"), f64::INFINITY, "{out}");
}

#[test]
fn invalid_families_are_left_out_and_the_rest_kept() {
    let mut page = Page::new();
    single(&mut page, "bad name", "counter", "h", 1.0);
    single(&mut page, "twice_total", "counter", "h", 1.0);
    single(&mut page, "twice_total", "counter", "h", 2.0);
    single(&mut page, "kind_total", "summary", "h", 1.0);
    single(&mut page, "neg_total", "counter", "h", -1.0);
    single(&mut page, "ok", "gauge", "h", -3.5);
    let out = page.encode();
    assert!(!out.contains("bad name"), "{out}");
    assert_eq!(sum(&out, "twice_total"), 1.0, "{out}");
    assert!(!out.contains("kind_total"), "{out}");
    assert!(!out.contains("neg_total "), "{out}");
    assert!(out.contains("ok -3.5\n"), "{out}");
}

#[test]
fn sum_adds_every_label_set_of_one_family_only() {
    let mut page = Page::new();
    family(
        &mut page,
        "refused_total",
        "counter",
        "h",
        "reason",
        &[("a".into(), 2.0), ("b".into(), 3.0)],
    );
    single(&mut page, "refused_total_seconds", "counter", "h", 100.0);
    single(&mut page, "attempts_total", "counter", "h", 7.0);
    let page = page.encode();
    assert_eq!(sum(&page, "refused_total"), 5.0);
    assert_eq!(sum(&page, "attempts_total"), 7.0);
    assert_eq!(sum(&page, "missing_total"), 0.0);
}
