//! Plumbing shared by the service shells of the GM, LM and worker binaries, and by
//! `loadgen`'s replay and embedded modes. Nothing here schedules: the cores stay pure.
//!
//! Layout:
//! - [`auth`]: the cluster credential of internal calls, open mode, worker networks;
//!   [`roles`]: per-role credentials (which role a caller is, who may call what).
//! - [`cluster`]: this process's cluster name; refusing another cluster's messages.
//! - [`body_budget`]: request bodies capped per request and in total.
//! - [`clock`]: the wall clock as [`common::Micros`] since the Unix epoch.
//! - [`settings`]: the flags every role shares, TOML config files, the generic
//!   flags > env > file > defaults layering and `--print-config`.
//! - [`retry`]: the one retry policy (exponential backoff with jitter) of every loop.
//! - [`logging`]: `tracing` set-up, text or JSON.
//! - [`runtime`]: the shared `main`: settings, logging, actix on tokio, exit code.
//! - [`shutdown`]: waiting for SIGTERM / SIGINT.
//! - [`metrics`]: Prometheus text exposition helpers, a histogram, and
//!   [`metrics::table`]: a role's families declared once as a table.
//! - [`links`]: transport-agnostic request/response links and fire-and-forget sinks,
//!   with an HTTP (bincode) implementation and an in-memory one.
//! - [`amqp`]: RabbitMQ publisher and subscriber with reconnection and backoff.
//! - [`sinks`]: event and snapshot sinks that publish on the broker.
//! - [`tls`]: optional HTTPS (rustls, ring): serving, and the CA clients trust;
//!   [`pki`]: a cluster's private CA and the certificates workers issue themselves.
//! - [`topology`]: exchange names and routing keys.
//! - [`admin`]: the operator's tools behind `loadgen certs`, `role-credentials`,
//!   `broker-users` and `healthcheck`: they write the files [`pki`], [`roles`] and
//!   [`topology`] read.

pub mod admin;
pub mod amqp;
pub mod auth;
pub mod body_budget;
pub mod clock;
pub mod cluster;
pub mod links;
pub mod logging;
pub mod metrics;
pub mod pki;
pub mod retry;
pub mod roles;
pub mod runtime;
pub mod settings;
pub mod shutdown;
pub mod sinks;
pub mod tls;
pub mod topology;
