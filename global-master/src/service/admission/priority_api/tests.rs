//! Unit tests of `priority_api.rs`: resolving a job's class, and who may use a
//! preempting one.

use super::*;
use crate::service::admission::api::{parse_job_request, QueueTable};
use crate::service::admission::users::Users;
use common::GmId;

/// `batch` (0, the default), `urgent` (100, preempting), `high` (50).
fn classes() -> PriorityClasses {
    PriorityClasses::parse(
        &["batch:0,urgent:100:preempting,high:50".into()],
        Some("batch"),
        1000,
    )
    .expect("classes")
}

/// alice: no preempting class; bob: `urgent`; carol: any (`"*"`); root: admin.
const TOKENS: &str = r#"
[[users]]
name = "alice"
token = "alice-token-0123456789"
queues = ["*"]

[[users]]
name = "bob"
token = "bob-token-0123456789"
queues = ["*"]
priority_classes = ["urgent"]

[[users]]
name = "carol"
token = "carol-token-0123456789"
queues = ["*"]
priority_classes = ["*"]

[[users]]
name = "root"
token = "root-token-0123456789"
admin = true
"#;

fn caller(name: &str, classes: &PriorityClasses) -> Caller {
    let users = Users::parse(TOKENS, false, classes).expect("tokens");
    users
        .find(format!("{name}-token-0123456789").as_bytes())
        .expect("user")
        .clone()
}

fn job(class: &str) -> String {
    let task = r#"{"resources":{"cpu_millis":1000,"memory_mb":64},"duration_ms":10}"#;
    format!(r#"{{"tasks":[{task},{task}]{class}}}"#)
}

/// The job's class as admission resolves it, then judged for `who`: the tasks'
/// values, or the refusal.
fn submit(body: &str, classes: &PriorityClasses, who: &str) -> Result<Vec<u16>, ApiError> {
    let mut j = parse_job_request(body.as_bytes(), 3, &QueueTable::new(GmId(0), None))?;
    let class = resolve_priority(&mut j, classes)?;
    authorize_class(&class, &caller(who, classes))?;
    Ok(j.tasks.iter().map(|t| t.priority).collect())
}

#[test]
fn a_job_names_a_known_priority_class_or_gets_the_default() {
    let classes = classes();
    let resolve = |body: String| submit(&body, &classes, "root");
    assert_eq!(resolve(job("")).expect("default"), vec![0, 0]);
    assert_eq!(
        resolve(job(r#","priority_class":"urgent""#)).expect("urgent"),
        vec![100, 100]
    );
    let e = resolve(job(r#","priority_class":"vip""#)).expect_err("unknown");
    assert_eq!((e.status, e.field.as_str()), (400, "priority_class"));
    assert!(e.error.contains("batch, urgent, high"), "{}", e.error);
    let e = resolve(job(r#","priority_class":7"#)).expect_err("not a string");
    assert_eq!((e.status, e.field.as_str()), (400, "priority_class"));
}

/// Issue 37's abuse case: a preempting class is for the users the tokens file
/// lets name it, and admins; the other classes are open to everyone.
#[test]
fn only_users_allowed_a_preempting_class_may_name_it() {
    let classes = classes();
    let urgent = job(r#","priority_class":"urgent""#);
    let e = submit(&urgent, &classes, "alice").expect_err("alice may not");
    assert_eq!((e.status, e.field.as_str()), (403, "priority_class"));
    assert!(
        e.error.contains("urgent") && e.error.contains("alice"),
        "names the class and the user: {}",
        e.error
    );
    for who in ["bob", "carol", "root"] {
        assert_eq!(submit(&urgent, &classes, who), Ok(vec![100, 100]), "{who}");
    }
    // Classes that do not preempt, named or by default, are for everyone.
    for who in ["alice", "bob", "carol", "root"] {
        let high = job(r#","priority_class":"high""#);
        assert_eq!(submit(&high, &classes, who), Ok(vec![50, 50]), "{who}");
        assert_eq!(submit(&job(""), &classes, who), Ok(vec![0, 0]), "{who}");
    }
    // Open mode: the anonymous caller is an admin.
    let mut j =
        parse_job_request(urgent.as_bytes(), 3, &QueueTable::new(GmId(0), None)).expect("job");
    let class = resolve_priority(&mut j, &classes).expect("urgent");
    assert_eq!(authorize_class(&class, &Caller::anonymous()), Ok(()));
}

/// A job naming no class gets the default one, judged the same way when it
/// preempts.
#[test]
fn a_preempting_default_class_is_judged_like_a_named_one() {
    let classes = PriorityClasses::parse(
        &["batch:0,urgent:100:preempting".into()],
        Some("urgent"),
        1000,
    )
    .expect("classes");
    let e = submit(&job(""), &classes, "alice").expect_err("alice may not");
    assert_eq!((e.status, e.field.as_str()), (403, "priority_class"));
    assert!(e.error.contains("urgent"), "{}", e.error);
    assert_eq!(submit(&job(""), &classes, "bob"), Ok(vec![100, 100]));
    let batch = job(r#","priority_class":"batch""#);
    assert_eq!(submit(&batch, &classes, "alice"), Ok(vec![0, 0]));
}

/// Names are exact: another spelling is no class (400 for everyone, nothing
/// resolved), and a JSON escape decodes to the same name for the resolution and
/// the check.
#[test]
fn another_spelling_of_a_class_does_not_slip_past() {
    let classes = classes();
    for spelled in [
        "URGENT",
        "urgent ",
        " urgent",
        "urgent%20",
        "%75rgent",
        "Urgent",
    ] {
        let body = job(&format!(r#","priority_class":"{spelled}""#));
        for who in ["alice", "bob"] {
            let e = submit(&body, &classes, who).expect_err(spelled);
            assert_eq!(
                (e.status, e.field.as_str()),
                (400, "priority_class"),
                "{spelled:?} by {who}"
            );
        }
    }
    let escaped = job(r#","priority_class":"\u0075rgent""#);
    let e = submit(&escaped, &classes, "alice").expect_err("still urgent");
    assert_eq!((e.status, e.field.as_str()), (403, "priority_class"));
    assert_eq!(submit(&escaped, &classes, "bob"), Ok(vec![100, 100]));
}
