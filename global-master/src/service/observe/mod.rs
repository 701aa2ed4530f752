//! What the GM tells about itself: the per-task and per-job status the API answers
//! ([`status`]), the pending list and the Prometheus page ([`report`]; its families declared once in
//! [`metrics`]), the last
//! task events ([`recent_events`]), the dashboard's overview ([`overview`]) and the
//! view of the LMs' nodes ([`nodes`]), and the accounting of runs per user and queue
//! ([`usage`]).

pub mod metrics;
pub mod nodes;
pub mod overview;
pub mod recent_events;
pub mod report;
pub mod status;
pub mod usage;
