//! The RabbitMQ precondition of the multi-process tests: never skipped silently.

use std::time::Duration;

pub const AMQP_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

/// Panics with instructions when no broker answers at [`AMQP_URL`].
pub fn require_rabbitmq() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("test runtime");
    if let Err(e) = rt.block_on(service_kit::amqp::probe(AMQP_URL, Duration::from_secs(5))) {
        panic!(
            "RabbitMQ not reachable at {AMQP_URL} ({e}); install rabbitmq-server and run `service rabbitmq-server start`"
        );
    }
}
