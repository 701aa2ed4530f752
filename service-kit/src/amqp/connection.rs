//! A broker connection: its URL (credentials from files, redacted for logs), how it is
//! opened (TLS, the cluster's vhost), its errors and its health.

use crate::topology::Exchange;
use common::ClusterName;
use lapin::options::ExchangeDeclareOptions;
use lapin::types::FieldTable;
use lapin::{Channel, Connection, ConnectionProperties, ExchangeKind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// Health of one broker link, for `/metrics` and `/healthz`.
#[derive(Debug, Default)]
pub struct LinkStatus {
    pub connected: AtomicBool,
    pub reconnects: AtomicU64,
    pub messages: AtomicU64,
    /// Publisher: body bytes accepted and not yet confirmed by the broker.
    pub pending_bytes: AtomicU64,
    /// Publisher: state messages replaced by a newer one of their slot before the
    /// broker took them ([`Publisher::publish_latest`](super::Publisher::publish_latest)).
    pub superseded: AtomicU64,
    /// Publisher: a replacement was logged since the last (re)connection.
    pub(super) superseding: AtomicBool,
}

impl LinkStatus {
    pub fn is_connected(&self) -> bool {
        self.connected.load(Ordering::Relaxed)
    }
}

/// Environment variable naming a file that holds the broker password.
pub const PASSWORD_FILE_ENV: &str = "MEGHA_AMQP_PASSWORD_FILE";
/// Environment variable naming a file that holds the broker user (so that one URL
/// serves every process of a deployment, each process's volume naming its user).
pub const USER_FILE_ENV: &str = "MEGHA_AMQP_USER_FILE";

/// Checks the scheme of a broker URL and, when `MEGHA_AMQP_USER_FILE` or
/// `MEGHA_AMQP_PASSWORD_FILE` names a file (set and not empty), puts its content
/// (trimmed, percent-encoded) in the URL as the user or the password.
pub fn resolve_url(url: String) -> anyhow::Result<String> {
    let read = |var: &str| -> anyhow::Result<Option<String>> {
        let file = std::env::var(var).unwrap_or_default();
        if file.is_empty() {
            return Ok(None);
        }
        let text =
            std::fs::read_to_string(&file).map_err(|e| anyhow::anyhow!("{var} {file}: {e}"))?;
        Ok(Some(text.trim().to_owned()))
    };
    resolve_url_with(url, read(USER_FILE_ENV)?, read(PASSWORD_FILE_ENV)?)
}

fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// [`resolve_url`] with the user and password files' contents given.
pub fn resolve_url_with(
    url: String,
    user: Option<String>,
    password: Option<String>,
) -> anyhow::Result<String> {
    let Some((scheme, rest)) = url.split_once("://") else {
        anyhow::bail!(
            "--amqp `{}`: not a URL (amqp://... or amqps://...)",
            redact(&url)
        );
    };
    if scheme != "amqp" && scheme != "amqps" {
        anyhow::bail!(
            "--amqp `{}`: the scheme must be amqp or amqps (TLS)",
            redact(&url)
        );
    }
    if user.is_none() && password.is_none() {
        return Ok(url);
    }
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let (userinfo, host) = match authority.rsplit_once('@') {
        Some((userinfo, host)) => (Some(userinfo), host),
        None => (None, authority),
    };
    let (url_user, url_password) = match userinfo {
        Some(u) => match u.split_once(':') {
            Some((user, password)) => (Some(user), Some(password.to_owned())),
            None => (Some(u), None),
        },
        None => (None, None),
    };
    let user = match (url_user, user.as_deref().map(percent_encode)) {
        (Some(a), Some(b)) if a != b => anyhow::bail!(
            "--amqp `{}` names broker user `{a}` and {USER_FILE_ENV} names `{b}`: give the user in one place",
            redact(&url)
        ),
        (_, Some(b)) => b,
        (Some(a), None) => a.to_owned(),
        (None, None) => anyhow::bail!(
            "{PASSWORD_FILE_ENV} is set but --amqp `{}` names no user (amqp://USER@host/vhost, or {USER_FILE_ENV})",
            redact(&url)
        ),
    };
    match password.as_deref().map(percent_encode).or(url_password) {
        Some(p) => Ok(format!("{scheme}://{user}:{p}@{host}/{path}")),
        None => Ok(format!("{scheme}://{user}@{host}/{path}")),
    }
}

/// The URL without its password (for logs and errors).
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, path) = rest
        .split_once('/')
        .map_or((rest, None), |(a, p)| (a, Some(p)));
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split(':').next().unwrap_or_default();
            format!("{user}:***@{host}")
        }
        None => authority.to_owned(),
    };
    match path {
        Some(p) => format!("{scheme}://{authority}/{p}"),
        None => format!("{scheme}://{authority}"),
    }
}

/// The broker user a connection to `url` authenticates as: the URL's user
/// (percent-decoded), or `guest` when it names none (lapin's default). Publishers put
/// it in every message's `user_id`, which the broker checks.
pub fn broker_user(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split_once('/').map_or(rest, |(a, _)| a);
    let Some((userinfo, _)) = authority.rsplit_once('@') else {
        return "guest".to_owned();
    };
    let user = userinfo.split(':').next().unwrap_or_default();
    if user.is_empty() {
        return "guest".to_owned();
    }
    percent_decode(user)
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (
            b[i],
            b.get(i + 1).copied().and_then(hex),
            b.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Why a broker link failed.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// An `amqps://` handshake failed (unknown CA, wrong name, not a TLS listener...):
    /// nothing was sent, and nothing is retried in plain text.
    #[error("TLS handshake with the broker failed: {0} (the broker's certificate must name the URL's host and be signed by a CA this process trusts: the system roots or --tls-ca-file)")]
    Tls(lapin::Error),
    #[error(transparent)]
    Amqp(#[from] lapin::Error),
}

impl LinkError {
    /// Classifies a connection error of `url`: on `amqps://`, an I/O error carrying a
    /// rustls error is the TLS handshake's.
    fn of_connect(url: &str, e: lapin::Error) -> LinkError {
        let tls = url.starts_with("amqps://")
            && matches!(&e, lapin::Error::IOError(io)
                if io.get_ref().is_some_and(|inner| inner.is::<rustls::Error>()));
        if tls {
            LinkError::Tls(e)
        } else {
            LinkError::Amqp(e)
        }
    }
}

/// Connects and declares the exchanges of `cluster`.
pub(super) async fn connect(
    url: &str,
    cluster: &ClusterName,
) -> Result<(Connection, Channel), LinkError> {
    let (conn, ch) = open(url).await?;
    let durable = ExchangeDeclareOptions {
        durable: true,
        ..Default::default()
    };
    ch.exchange_declare(
        &Exchange::State.name(cluster),
        ExchangeKind::Fanout,
        durable,
        FieldTable::default(),
    )
    .await?;
    ch.exchange_declare(
        &Exchange::Events.name(cluster),
        ExchangeKind::Topic,
        durable,
        FieldTable::default(),
    )
    .await?;
    Ok((conn, ch))
}

/// Connects (and opens a channel), declaring nothing.
async fn open(url: &str) -> Result<(Connection, Channel), LinkError> {
    let props = ConnectionProperties::default()
        .with_executor(tokio_executor_trait::Tokio::current())
        .with_reactor(tokio_reactor_trait::Tokio);
    let conn = if url.starts_with("amqps://") {
        // lapin is built with rustls: the handshake happens or the connection fails.
        crate::tls::install_provider();
        let tls = lapin::tcp::OwnedTLSConfig {
            identity: None,
            cert_chain: crate::tls::extra_ca_pem().map(str::to_owned),
        };
        Connection::connect_with_config(url, props, tls)
            .await
            .map_err(|e| LinkError::of_connect(url, e))?
    } else {
        Connection::connect(url, props).await?
    };
    let ch = conn.create_channel().await?;
    Ok((conn, ch))
}

/// Waits until a broker answers at `url` (or `timeout` passes).
pub async fn probe(url: &str, timeout: Duration) -> Result<(), String> {
    match tokio::time::timeout(timeout, open(url)).await {
        Ok(Ok((conn, _))) => {
            let _ = conn.close(200, "probe").await;
            Ok(())
        }
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("timed out".into()),
    }
}
