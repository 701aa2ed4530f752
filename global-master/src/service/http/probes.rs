//! The GM's open probe routes: `GET /healthz` (alive, whether every LM's state is
//! fresh, counts) and `GET /metrics` (Prometheus text). Neither needs a credential,
//! and neither shows anything secret.

use super::answers::{Health, HealthStatus, Refusal};
use super::state::{unavailable, ApiState};
use crate::service::actor::queries::GetLoad;
use crate::service::observe::report::RenderMetrics;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;

#[utoipa::path(get, path = "/healthz", tag = "operations", security(()),
    responses(
        (status = 200, description = "Alive; `status` says whether every LM's state is fresh", body = Health),
        (status = 503, description = "The GM's actor does not answer", body = Refusal),
    ))]
pub(crate) async fn healthz(State(s): State<ApiState>) -> Response {
    match s.gm.send(GetLoad).await {
        Ok(load) => Json(Health {
            // Degraded: some LM's state not taken for a while (see `silent_lms`).
            status: if load.silent_lms.is_empty() {
                HealthStatus::Ok
            } else {
                HealthStatus::Degraded
            },
            silent_lms: load.silent_lms,
            ready: load.full_view,
            queued: load.queued,
            outstanding: load.outstanding,
            nodes: load.nodes,
            capacity: load.capacity,
            broker_connected: s.broker.as_ref().map(|b| b.is_connected()),
        })
        .into_response(),
        Err(e) => unavailable(&e.to_string()),
    }
}

#[utoipa::path(get, path = "/metrics", tag = "operations", security(()),
    responses(
        (status = 200, description = "Prometheus text exposition (counts only, no credential)", body = String, content_type = "text/plain"),
        (status = 503, description = "The GM's actor does not answer", body = Refusal),
    ))]
pub(crate) async fn metrics(State(s): State<ApiState>) -> Response {
    match s.gm.send(RenderMetrics).await {
        Ok(mut page) => {
            crate::service::admission::users::render_metrics(&s.auth, &mut page);
            if let Some(r) = &s.route {
                r.counters.render(&mut page);
            }
            s.cluster.render(&mut page);
            crate::service::durable::standby::StandbyStatus::render(
                s.standby.as_deref(),
                &mut page,
            );
            if let Some(l) = &s.limits {
                l.bodies.render(&mut page);
                service_kit::metrics::single(
                    &mut page,
                    "megha_gm_broker_backlog_bytes",
                    "gauge",
                    "Event bytes waiting for the broker's confirmation.",
                    l.publisher.pending_bytes() as f64,
                );
            }
            if let Some(senders) = &s.senders {
                senders.render(&mut page);
            }
            if let Some(b) = &s.broker {
                service_kit::metrics::single(
                    &mut page,
                    "megha_broker_connected",
                    "gauge",
                    "1 while the state subscription is connected.",
                    f64::from(u8::from(b.is_connected())),
                );
                service_kit::metrics::single(
                    &mut page,
                    "megha_broker_reconnects_total",
                    "counter",
                    "Broker reconnections of the state subscription.",
                    b.reconnects.load(std::sync::atomic::Ordering::Relaxed) as f64,
                );
            }
            let content_type = service_kit::metrics::CONTENT_TYPE;
            ([(header::CONTENT_TYPE, content_type)], page.encode()).into_response()
        }
        Err(e) => unavailable(&e.to_string()),
    }
}
