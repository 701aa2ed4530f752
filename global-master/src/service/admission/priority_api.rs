//! A job's priority class (docs/priorities.md): resolved once, from the name the
//! job gives or else the default class ([`resolve_priority`]), and judged on that
//! same resolved value against the caller ([`authorize_class`]): a class that
//! preempts may be named only by the users the tokens file lets
//! (`priority_classes`) and by admins; the other classes are open to every user.
//!
//! Class names are exact: `URGENT` or `urgent ` is no class (400), never `urgent`.
//! The name is the JSON string as decoded, so `"\u0075rgent"` is `urgent` for the
//! resolution and for the check alike.

use super::api::{ApiError, NewJob};
use super::users::Caller;
use common::priority::PriorityClasses;

/// The class a job runs at, as resolved: the value its tasks carry and the name
/// its caller is judged on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobClass {
    pub name: String,
    pub value: u16,
    /// Tasks of this value may preempt (as the GM's core decides it, by value).
    pub preempting: bool,
}

/// The class of a job naming `class` (the default class when `None`), whose value
/// is set on every task of `job`; an unknown class is a 400 naming `priority_class`.
pub fn resolve_priority(job: &mut NewJob, classes: &PriorityClasses) -> Result<JobClass, ApiError> {
    let name = job
        .priority_class
        .clone()
        .unwrap_or_else(|| classes.default.clone());
    let value = match classes.by_name(&name) {
        Some(c) => c.value,
        None if job.priority_class.is_none() => classes.default_value(),
        None => {
            return Err(ApiError::new(
                400,
                "priority_class",
                format!(
                    "unknown priority class `{name}`; the classes are {}",
                    classes.names()
                ),
            ))
        }
    };
    for t in &mut job.tasks {
        t.priority = value;
    }
    Ok(JobClass {
        name,
        value,
        preempting: classes.preempting(value),
    })
}

/// Whether `caller` may submit a job of `class`: any class that does not preempt;
/// a preempting one if the caller is an admin or its `priority_classes` lists it.
/// Otherwise a 403 naming `priority_class`, the class and the user.
pub fn authorize_class(class: &JobClass, caller: &Caller) -> Result<(), ApiError> {
    if !class.preempting || caller.may_preempt_as(&class.name) {
        return Ok(());
    }
    Err(ApiError::new(
        403,
        "priority_class",
        format!(
            "user {} may not use the preempting priority class `{}` (the tokens file's priority_classes)",
            caller.user, class.name
        ),
    ))
}

#[cfg(test)]
mod tests;
