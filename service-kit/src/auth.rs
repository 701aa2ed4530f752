//! The cluster credential: what every role presents on its internal calls (GM -> LM,
//! LM -> worker, worker -> LM, LM -> GM, GM -> GM forwarding) and requires on its
//! internal endpoints: one shared secret (simple mode), or a token per role (see
//! [`crate::roles`]: then each endpoint names the roles that may call it).
//!
//! - [`ClusterSecret`]: read from `--cluster-secret-file` / `MEGHA_CLUSTER_SECRET_FILE`
//!   or `MEGHA_CLUSTER_SECRET` (never a flag: a command line is visible to every
//!   local user); compared in constant time (`subtle`); its `Debug` hides it.
//! - [`ClusterGuard`]: checks the [`CLUSTER_HEADER`] of a request, counts and logs
//!   refusals (never the presented value), renders its counters for `/metrics`.
//! - [`require_cluster`]: an axum layer over a whole router, so that every route a
//!   role adds later is guarded by default; only [`OPEN_PATHS`] stay open.
//! - [`open_mode_allowed`]: without a secret a role runs open (a loud warning) only
//!   when it listens on loopback.
//! - [`WorkerNetworks`]: the networks a worker may name as its callback URL.
//!
//! Layout: the credential itself (`secret`); `guard` checks it on every internal
//! route; `listen` decides whether a role may start open; `networks` checks
//! worker callbacks; `user` is the client side of a user's API token.

mod guard;
mod listen;
mod networks;
mod secret;
pub mod signed;
mod user;

pub use guard::{
    any_role, forbidden, peer, render_counters, require_cluster, unauthorized, AuthCounters,
    ClusterGuard, Refusal,
};
pub use listen::{check_start, is_loopback_listen, open_mode_allowed};
pub use networks::{CheckedHost, WorkerNetworks};
pub use secret::{
    client_headers, order_mac, order_mac_valid, send, ClusterSecret, Presented, Signing,
    WorkerSession, CLUSTER_HEADER, MIN_SECRET_LEN, OPEN_PATHS, ORDER_KEY_HEADER, ORDER_MAC_HEADER,
    SECRET_ENV, WORKER_SESSION_HEADER,
};
pub use signed::SIGNATURE_HEADER;
pub use user::{user_client, user_token, TOKEN_ENV};
