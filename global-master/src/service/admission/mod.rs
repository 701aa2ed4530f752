//! What a request must be before the GM takes it: the submission format and its
//! validation ([`api`]; [`executor_api`]: how the worker runs a task; [`lra_api`]:
//! long-running applications and their constraints; [`stages_api`]: the stages of a
//! DAG job; [`utility_api`]: a job's utility tree, soft constraints;
//! [`constraints_api`]: a task's hard constraints, by id or attribute name;
//! [`priority_api`]: a job's priority class and who may use it), who may call
//! and on which queues ([`users`]), and which GM a request belongs to ([`route`]: work for the
//! designated GM is forwarded there).

pub mod api;
pub mod constraints_api;
pub mod error;
pub mod executor_api;
pub mod gang_api;
pub mod lra_api;
pub mod priority_api;
pub mod remote_after;
pub mod route;
pub mod stages_api;
pub mod users;
pub mod utility_api;
