//! The worker as a service: the pure cores (one per node) in an actix actor, an HTTP
//! API for start orders, reports to the LM over HTTP (bincode, in order, retried).
//!
//! - [`config`]: flags, environment, TOML file.
//! - [`actor`]: the actor, [`actor::WorkerActor`], its fields private to it and its
//!   submodules: [`actor::fencing`] (stop all when the LM's lease lapses),
//!   [`actor::metrics`] (Prometheus text).
//! - [`http`]: the routes (they ask the actor by message only).

pub mod actor;
pub mod config;
pub mod ended_runs;
pub mod fence;
pub mod http;

#[cfg(test)]
mod holding_tests;

use actix::Actor;
use anyhow::{Context as _, Result};
use common::messages::{
    WorkerAlive, WorkerAliveAnswer, WorkerAssignment, WorkerRegistration, WorkerReport,
};
use common::protocol::WorkerToLm;
use service_kit::links::{fn_link, http_client_with, Call, HttpLink, Link};
use service_kit::roles::Role;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Runs the worker until SIGTERM/SIGINT, then drains: waits for running tasks to
/// finish and their reports to reach the LM (up to the drain timeout).
pub async fn serve(s: config::WorkerSettings) -> Result<()> {
    service_kit::auth::check_start(
        s.tls.ca.as_deref(),
        s.cluster_secret.as_ref(),
        &s.listen,
        service_kit::roles::Role::Worker,
        None,
    )?;
    let cluster = service_kit::cluster::Cluster::new(s.cluster_name.clone(), "worker");
    let client = http_client_with(
        Duration::from_secs(10),
        s.cluster_secret.as_ref(),
        Some(&s.cluster_name),
    );
    // The session the LM issues at registration: sent on every report and check-in
    // (issue 32: the LM takes reports only on this worker's own nodes).
    let session = service_kit::auth::WorkerSession::default();
    let to_lm: Link<Vec<WorkerToLm>, ()> = Arc::new(HttpLink {
        client: client.clone(),
        url: format!("{}/v1/worker/messages", s.lm_url),
        retries: 3,
        cluster: cluster.clone(),
        session: Some(session.clone()),
        signing: service_kit::auth::Signing::new(s.cluster_secret.as_ref(), Role::Lm),
    });
    let reports = fn_link(move |reports: Vec<WorkerReport>| {
        let to_lm = to_lm.clone();
        async move {
            to_lm
                .call(reports.into_iter().map(WorkerToLm::Report).collect())
                .await
        }
    });
    let executors = crate::exec::Executors::new(s.exec.clone())
        .with_context(|| format!("cannot create the data dir {}", s.exec.data_dir.display()))?;
    // How runs of an earlier life of this worker (same cluster, LM and slot)
    // ended: a restarted LM must hear of it (see `ended_runs`).
    let owner = format!("{} {} {}", s.cluster_name, s.lm_url, s.slot);
    let ended = ended_runs::EndedRuns::open(&s.exec.data_dir, &owner);
    let ended_before = ended.list();
    let supervisor = executors.supervisor();
    let worker = actor::WorkerActor::new(reports)
        .with_ended_runs(ended)
        .with_queueing(s.queue_order, s.queueable_cap)
        .with_executors(executors, s.default_executor.clone())
        .start();
    let listener = tokio::net::TcpListener::bind(&s.listen)
        .await
        .with_context(|| format!("cannot listen on {}", s.listen))?;
    let local = listener.local_addr()?;
    let url = s
        .advertise_url
        .clone()
        .unwrap_or_else(|| format!("{}://{local}", s.tls.scheme()));
    // With --tls-issuer-cert: the certificate for the address the LM will call.
    let mut tls = s.tls.clone();
    tls.issue_for(&url)?;
    let slot = if s.slot == common::messages::AUTO_SLOT {
        "auto".to_owned()
    } else {
        s.slot.to_string()
    };
    tracing::info!(listen = %local, lm = %s.lm_url, cluster = %s.cluster_name, %slot, "worker listening");
    println!("listening on {}://{local}", s.tls.scheme());
    // The key under which the LM signs its orders (given to it at registration only).
    let (order_key, _) = service_kit::auth::WorkerSession::issue()?;
    let its_lm = http::ItsLm::default();
    let app = http::router_with_order_key(
        worker.clone(),
        service_kit::auth::ClusterGuard::new(s.cluster_secret.clone(), "worker")
            .with_callers(http::callers),
        cluster.clone(),
        Some(order_key.as_bytes().to_vec()),
        its_lm.clone(),
    );
    let server = tokio::spawn(async move {
        service_kit::tls::serve(listener, app, &tls, service_kit::shutdown::signal()).await
    });
    // Register (retrying until the LM answers), then take the assigned nodes.
    let register = HttpLink {
        client: service_kit::links::http_client_with_headers(
            Duration::from_secs(10),
            s.cluster_secret.as_ref(),
            Some(&s.cluster_name),
            &[(service_kit::auth::ORDER_KEY_HEADER, order_key)],
        ),
        url: format!("{}/v1/register", s.lm_url),
        retries: 0,
        cluster: cluster.clone(),
        session: Some(session),
        signing: service_kit::auth::Signing::new(s.cluster_secret.as_ref(), Role::Lm),
    };
    let registration = WorkerRegistration {
        slot: s.slot,
        url,
        holding: Vec::new(),
        ended: ended_before,
    };
    let Some((assignment, sent)) =
        register_until_answered(&register, registration.clone(), &server).await?
    else {
        return Ok(());
    };
    let registration = WorkerRegistration {
        slot: assignment.slot,
        ..registration
    };
    let (lease, confirmed) = fence::Lease::new(assignment.lease_ms);
    lease.confirm(sent, lease.ms);
    log_lease(lease.ms, s.lm_check);
    let guard = tokio::spawn(fence::guard(confirmed, worker.clone(), supervisor));
    its_lm.assigned(&assignment);
    worker.do_send(actor::Assign(assignment));
    let watcher = tokio::spawn(watch_lm(
        client,
        s.lm_url.clone(),
        s.lm_check,
        register,
        registration,
        (worker.clone(), its_lm.clone()),
        lease,
    ));
    let served = server.await.context("server task");
    watcher.abort();
    guard.abort();
    served??;
    let deadline = Instant::now() + s.drain_timeout;
    while Instant::now() < deadline {
        match worker.send(actor::GetLoad).await {
            Ok((0, 0)) | Err(_) => break,
            Ok(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    // What still runs is killed (SIGTERM, grace, SIGKILL); then the cgroup goes.
    let deadline = Instant::now() + s.exec.grace + Duration::from_secs(1);
    let stop = actor::StopExecutors {
        remove_cgroup: false,
    };
    while let Ok(n @ 1..) = worker.send(stop).await {
        if Instant::now() >= deadline {
            tracing::warn!(running = n, "exec tasks still ending at shutdown");
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = worker
        .send(actor::StopExecutors {
            remove_cgroup: true,
        })
        .await;
    tracing::info!("worker stopped");
    Ok(())
}

/// Says whether this worker fences itself (see [`fence`]), and warns when its
/// check-ins are too rare for the lease.
fn log_lease(lease_ms: u64, check: Duration) {
    if lease_ms == 0 {
        tracing::info!(
            "the LM gives no lease (--worker-fence false): this worker never fences itself"
        );
        return;
    }
    let lease = Duration::from_millis(lease_ms);
    let after = fence::fence_after(lease);
    tracing::info!(
        lease_ms,
        fence_after_ms = after.as_millis() as u64,
        "lease: unconfirmed by the LM this long, the worker stops its tasks"
    );
    if check * 2 > after {
        tracing::warn!(lm_check_ms = check.as_millis() as u64, fence_after_ms = after.as_millis() as u64, "--lm-check-ms is over half the fence time: one lost check-in may fence this worker; check in more often or raise the LM's --worker-timeout-ms");
    }
}

/// Registers, retrying with backoff until the LM answers; `None` if the server
/// stopped meanwhile (shutdown). An LM of another cluster is an error at once: the
/// worker exits naming both clusters rather than retrying forever. With the
/// assignment: when the registration it answers was sent (the lease counts from
/// there).
async fn register_until_answered<T>(
    register: &HttpLink,
    registration: WorkerRegistration,
    server: &tokio::task::JoinHandle<T>,
) -> Result<Option<(WorkerAssignment, tokio::time::Instant)>> {
    let mut backoff =
        service_kit::retry::Backoff::new(Duration::from_millis(100), Duration::from_secs(2));
    loop {
        let sent = tokio::time::Instant::now();
        match register.call(registration.clone()).await {
            Ok(a) => return Ok(Some((a, sent))),
            Err(e @ service_kit::links::LinkError::ForeignCluster { .. }) => {
                anyhow::bail!("cannot register with the LM (--lm-url): {e}")
            }
            Err(e) => {
                let delay = backoff.next_delay();
                tracing::warn!(error = %e, retry_in_ms = delay.as_millis() as u64, "cannot register with the LM yet");
                if server.is_finished() {
                    return Ok(None);
                }
                tokio::time::sleep(delay).await;
            }
        }
    }
}

/// Every `period`, checks in with the LM (`POST /v1/worker/alive`): that keeps the LM
/// from declaring this worker lost, and tells whether the LM still counts it
/// registered. When it does not (the LM restarted and lost its state, or declared
/// this worker lost while it could not reach it), registers again listing the tasks
/// held here, so that the LM accounts for them (a restarted LM adopts them; tasks the
/// LM reported lost meanwhile are killed). Reports wait meanwhile: the LM refuses them
/// from a worker that has not registered with it, and the ordered sender retries.
/// Every answer that counts this worker registered renews its `lease`.
async fn watch_lm(
    client: reqwest::Client,
    lm_url: String,
    period: Duration,
    register: HttpLink,
    registration: WorkerRegistration,
    (worker, its_lm): (actix::Addr<actor::WorkerActor>, http::ItsLm),
    mut lease: fence::Lease,
) {
    let alive = HttpLink {
        client,
        url: format!("{lm_url}/v1/worker/alive"),
        retries: 0,
        cluster: register.cluster.clone(),
        session: register.session.clone(),
        signing: register.signing.clone(),
    };
    let check_in = WorkerAlive {
        slot: registration.slot,
        url: registration.url.clone(),
    };
    loop {
        tokio::time::sleep(period).await;
        let sent = tokio::time::Instant::now();
        let answer: WorkerAliveAnswer = match alive.call(check_in.clone()).await {
            Ok(a) => a,
            Err(e) => {
                tracing::debug!(error = %e, "cannot check in with the LM; will retry");
                continue;
            }
        };
        let Ok((holding, ended, known)) = worker.send(actor::Holding).await else {
            return;
        };
        if answer.registered && known == Some(answer.incarnation) {
            lease.confirm(sent, lease.ms);
            continue;
        }
        tracing::info!(lm = %lm_url, old = ?known, new = answer.incarnation, registered = answer.registered, tasks = holding.len(), "the LM no longer counts this worker registered (it restarted, or declared this worker lost); registering again with the tasks held here");
        let again = WorkerRegistration {
            holding,
            ended,
            ..registration.clone()
        };
        let sent = tokio::time::Instant::now();
        let answered: Result<WorkerAssignment, _> = register.call(again).await;
        match answered {
            Ok(a) => {
                if lease.ms != a.lease_ms {
                    log_lease(a.lease_ms, period);
                }
                lease.ms = a.lease_ms;
                lease.confirm(sent, a.lease_ms);
                its_lm.assigned(&a);
                worker.do_send(actor::Assign(a));
            }
            Err(e) => tracing::warn!(error = %e, "registering again failed; will retry"),
        }
    }
}

/// The binary's entry point.
pub fn main_with(args: config::WorkerArgs) -> std::process::ExitCode {
    service_kit::runtime::run_service("worker", args.resolve(), |s| s.process, serve)
}
