//! Signed internal requests (issue 32): with per-role credential files, a process
//! never sends its credential to a callee. Each process holds its own ed25519 key
//! and a **certificate** for it: `<role>.<id>.<public key>.<signature>`, where the
//! id is the process's number in its role (`--id`; `*` when the file is for every
//! process of the role), signed by the cluster's credential authority (CA), whose
//! public key every file holds. Each internal request carries one header,
//! [`SIGNATURE_HEADER`]: the certificate, a timestamp, a random nonce and the
//! signature (under the certificate's key) over
//!
//! ```text
//! megha-request-v1 \n <certificate> \n <callee role> \n <METHOD> \n <path?query> \n
//! <timestamp ms> \n <nonce> \n <SHA-256 of the body, hex>
//! ```
//!
//! So a callee holds nothing it could reuse (the CA's public key only: an LM cannot
//! pose as a GM to another LM, nor LM 1 as LM 0 when each LM has its own file), a
//! captured request cannot be altered (method, path, query and body are signed),
//! cannot be sent to another role (the callee's role is signed), and cannot be
//! replayed: the callee refuses a timestamp more than [`MAX_SKEW`] away from its own
//! clock, and a nonce it has already seen within that window ([`NonceCache`],
//! bounded). Each retry of a request is signed anew (a new nonce). The callee gets
//! the signer's [`Identity`] (role and id) to check the message against (a GM's
//! request must name that GM, an LM's report that LM).

use crate::roles::Role;
use anyhow::{anyhow, Result};
use ring::signature::{Ed25519KeyPair, KeyPair as _, UnparsedPublicKey, ED25519};
use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The header of a signed request: `<certificate>;<timestamp ms>;<nonce hex>;<signature hex>`.
pub const SIGNATURE_HEADER: &str = "x-megha-signature";
/// How far a request's timestamp may be from the callee's clock (either way): the
/// window within which its nonce is remembered. Hosts' clocks must agree this well.
pub const MAX_SKEW: Duration = Duration::from_secs(60);
/// The most nonces a callee remembers (about 40 MiB at most): within [`MAX_SKEW`],
/// more signed requests than this are refused as [`SignatureRefusal::Busy`] rather
/// than forgetting a nonce early.
pub const NONCE_CAPACITY: usize = 1 << 20;
/// Certificates a callee remembers as checked (so a request costs one signature
/// check, not two); the memory is emptied when full.
const CHECKED_CERTIFICATES: usize = 4096;

/// Milliseconds since the Unix epoch, by this host's clock.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Who signed: a role, and the process's number in it (`None`: a credential for
/// every process of the role).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Identity {
    pub role: Role,
    pub id: Option<u16>,
}

impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.id {
            Some(id) => write!(f, "{} {id}", self.role),
            None => write!(f, "any {}", self.role),
        }
    }
}

impl Identity {
    fn id_text(&self) -> String {
        self.id.map_or_else(|| "*".to_owned(), |i| i.to_string())
    }

    /// The file name `make-role-credentials` gives this identity's credential.
    pub fn file_name(&self) -> String {
        match self.id {
            Some(id) => format!("{}-{id}.toml", self.role),
            None => format!("{}.toml", self.role),
        }
    }
}

fn certificate_message(who: Identity, public: &str) -> Vec<u8> {
    format!(
        "megha-certificate-v1\n{}\n{}\n{public}",
        who.role,
        who.id_text()
    )
    .into_bytes()
}

fn role_named(name: &str) -> Option<Role> {
    Role::ALL.iter().copied().find(|r| r.name() == name)
}

/// The cluster's credential authority: the key that certifies every process's key.
/// Kept by the operator (`make-role-credentials` writes it to `ca-key` beside the
/// files, to issue more later); no process needs it. `Debug` hides it.
pub struct Authority {
    key: Ed25519KeyPair,
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Authority(<private key>)")
    }
}

impl Authority {
    pub fn from_seed(seed: &[u8; 32]) -> Result<Self> {
        let key = Ed25519KeyPair::from_seed_unchecked(seed)
            .map_err(|_| anyhow!("not an ed25519 seed"))?;
        Ok(Authority { key })
    }

    pub fn public_key(&self) -> [u8; 32] {
        public_of(&self.key)
    }

    /// The certificate of `public` for `who`.
    pub fn certify(&self, who: Identity, public: &[u8; 32]) -> String {
        let public = crate::roles::hex(public);
        let sig = self.key.sign(&certificate_message(who, &public));
        format!(
            "{}.{}.{public}.{}",
            who.role,
            who.id_text(),
            crate::roles::hex(sig.as_ref())
        )
    }
}

fn public_of(key: &Ed25519KeyPair) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(key.public_key().as_ref());
    out
}

/// A certificate's parts, as written (checked or not).
#[derive(Debug, Clone)]
pub struct Certificate<'a> {
    pub who: Identity,
    public_hex: &'a str,
    public: [u8; 32],
    signature: Vec<u8>,
}

impl<'a> Certificate<'a> {
    /// Reads `text` without checking its signature.
    pub fn parse(text: &'a str) -> Result<Self, SignatureRefusal> {
        let [role, id, public_hex, sig] = four(text, '.')?;
        let role = role_named(role).ok_or(SignatureRefusal::Malformed)?;
        let id = match id {
            "*" => None,
            n => Some(n.parse().map_err(|_| SignatureRefusal::Malformed)?),
        };
        let public = unhex(public_hex)
            .and_then(|v| <[u8; 32]>::try_from(v).ok())
            .ok_or(SignatureRefusal::Malformed)?;
        Ok(Certificate {
            who: Identity { role, id },
            public_hex,
            public,
            signature: unhex(sig).ok_or(SignatureRefusal::Malformed)?,
        })
    }

    /// True when the authority whose public key is `ca` signed it.
    pub fn signed_by(&self, ca: &[u8; 32]) -> bool {
        UnparsedPublicKey::new(&ED25519, ca)
            .verify(
                &certificate_message(self.who, self.public_hex),
                &self.signature,
            )
            .is_ok()
    }

    pub fn public_key(&self) -> &[u8; 32] {
        &self.public
    }
}

/// This process's signing key and its certificate. `Debug` hides the key.
pub struct Signer {
    who: Identity,
    key: Ed25519KeyPair,
    certificate: String,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Signer({}, <private key>)", self.who)
    }
}

/// What a request signs, in the order it is signed.
#[derive(Debug)]
pub struct Signed<'a> {
    pub callee: Role,
    pub method: &'a str,
    /// The request target as sent: path, and `?query` if any.
    pub target: &'a str,
    pub body: &'a [u8],
}

fn message(certificate: &str, s: &Signed, ts_ms: u64, nonce: &str) -> Vec<u8> {
    let digest = crate::roles::hex(&crate::roles::digest(s.body));
    format!(
        "megha-request-v1\n{certificate}\n{}\n{}\n{}\n{ts_ms}\n{nonce}\n{digest}",
        s.callee, s.method, s.target
    )
    .into_bytes()
}

impl Signer {
    /// The signer with the key of `seed` and its `certificate`, which must be for
    /// this key and signed by the authority `ca`.
    pub fn new(seed: &[u8; 32], certificate: &str, ca: &[u8; 32]) -> Result<Self> {
        let key = Ed25519KeyPair::from_seed_unchecked(seed)
            .map_err(|_| anyhow!("key: not an ed25519 seed"))?;
        let c = Certificate::parse(certificate).map_err(|_| {
            anyhow!("certificate: not <role>.<id or *>.<public key hex>.<signature hex>")
        })?;
        if !c.signed_by(ca) {
            anyhow::bail!("certificate: not signed by the file's ca (made by another run of make-role-credentials?)");
        }
        if c.public != public_of(&key) {
            anyhow::bail!("key: not the key the certificate certifies");
        }
        Ok(Signer {
            who: c.who,
            key,
            certificate: certificate.to_owned(),
        })
    }

    /// A new random key for `who`, certified by `authority`.
    pub fn issue(authority: &Authority, who: Identity) -> Result<([u8; 32], Self)> {
        let seed = new_seed()?;
        let key = Ed25519KeyPair::from_seed_unchecked(&seed)
            .map_err(|_| anyhow!("not an ed25519 seed"))?;
        let certificate = authority.certify(who, &public_of(&key));
        Ok((
            seed,
            Signer {
                who,
                key,
                certificate,
            },
        ))
    }

    pub fn role(&self) -> Role {
        self.who.role
    }

    pub fn identity(&self) -> Identity {
        self.who
    }

    pub fn certificate(&self) -> &str {
        &self.certificate
    }

    /// This key's public half.
    pub fn public_key(&self) -> [u8; 32] {
        public_of(&self.key)
    }

    /// The [`SIGNATURE_HEADER`] value for `s`, at `ts_ms` with a fresh nonce.
    pub fn header(&self, s: &Signed, ts_ms: u64) -> Result<String> {
        use ring::rand::SecureRandom as _;
        let mut nonce = [0u8; 16];
        ring::rand::SystemRandom::new()
            .fill(&mut nonce)
            .map_err(|_| anyhow!("no randomness for a request nonce"))?;
        let nonce = crate::roles::hex(&nonce);
        let sig = self.key.sign(&message(&self.certificate, s, ts_ms, &nonce));
        Ok(format!(
            "{};{ts_ms};{nonce};{}",
            self.certificate,
            crate::roles::hex(sig.as_ref())
        ))
    }

    /// Signs `request` (a built reqwest request) for `callee` now: adds the
    /// [`SIGNATURE_HEADER`]. A streaming body cannot be signed (an error).
    pub fn sign_request(&self, request: &mut reqwest::Request, callee: Role) -> Result<()> {
        let target = match request.url().query() {
            Some(q) => format!("{}?{q}", request.url().path()),
            None => request.url().path().to_owned(),
        };
        let body = match request.body() {
            None => &[][..],
            Some(b) => b
                .as_bytes()
                .ok_or_else(|| anyhow!("a streaming body cannot be signed"))?,
        };
        let method = request.method().as_str().to_owned();
        let value = self.header(
            &Signed {
                callee,
                method: &method,
                target: &target,
                body,
            },
            now_ms(),
        )?;
        let mut value = reqwest::header::HeaderValue::from_str(&value)?;
        value.set_sensitive(true);
        request.headers_mut().insert(SIGNATURE_HEADER, value);
        Ok(())
    }
}

/// Why a signed request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignatureRefusal {
    /// The header is not `<certificate>;<ms>;<nonce>;<signature>`.
    Malformed,
    /// The certificate is not the cluster authority's, or the signature does not
    /// verify under its key (altered, signed by another key, or for another callee).
    Bad,
    /// The timestamp is further than [`MAX_SKEW`] from this host's clock (by this
    /// many seconds, signed: positive is in the future).
    Stale(i64),
    /// This nonce was seen already: a replay.
    Replayed,
    /// The nonce cache is full (more than [`NONCE_CAPACITY`] requests in the window).
    Busy,
}

/// The cluster authority's public key and the nonces seen: what a callee checks a
/// signed request with.
pub struct Verifier {
    ca: [u8; 32],
    seen: Mutex<NonceCache>,
    checked: Mutex<HashSet<String>>,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Verifier(<ca>)")
    }
}

/// Nonces seen within the skew window, forgotten once their timestamp is out of it
/// (a request that old is refused as stale anyway).
#[derive(Debug, Default)]
pub struct NonceCache {
    set: HashSet<u128>,
    order: VecDeque<(u64, u128)>,
}

impl NonceCache {
    /// Records `nonce` (timestamped `ts_ms`); refused if it was seen already.
    fn admit(&mut self, nonce: u128, ts_ms: u64, now_ms: u64) -> Result<(), SignatureRefusal> {
        let horizon = now_ms.saturating_sub(MAX_SKEW.as_millis() as u64);
        // Timestamps arrive nearly in order; an entry is dropped once the newest
        // admitted before it is out of the window (an older straggler stays a little
        // longer, never shorter).
        while let Some(&(ts, n)) = self.order.front() {
            if ts >= horizon {
                break;
            }
            self.order.pop_front();
            self.set.remove(&n);
        }
        if self.set.contains(&nonce) {
            return Err(SignatureRefusal::Replayed);
        }
        if self.set.len() >= NONCE_CAPACITY {
            return Err(SignatureRefusal::Busy);
        }
        self.set.insert(nonce);
        let ts = self
            .order
            .back()
            .map_or(ts_ms, |&(last, _)| last.max(ts_ms));
        self.order.push_back((ts, nonce));
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.set.len()
    }

    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }
}

/// A parsed [`SIGNATURE_HEADER`] (nothing checked yet but its form).
#[derive(Debug)]
pub struct Presented<'a> {
    certificate_text: &'a str,
    certificate: Certificate<'a>,
    ts_ms: u64,
    nonce: &'a str,
    signature: Vec<u8>,
}

impl<'a> Presented<'a> {
    /// Parses the header's value; `Malformed` when it is not one.
    pub fn parse(value: &'a [u8]) -> Result<Self, SignatureRefusal> {
        let text = std::str::from_utf8(value).map_err(|_| SignatureRefusal::Malformed)?;
        let [cert, ts, nonce, sig] = four(text.trim(), ';')?;
        let ts_ms = ts.parse().map_err(|_| SignatureRefusal::Malformed)?;
        if nonce.len() != 32 || !nonce.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(SignatureRefusal::Malformed);
        }
        Ok(Presented {
            certificate_text: cert,
            certificate: Certificate::parse(cert)?,
            ts_ms,
            nonce,
            signature: unhex(sig).ok_or(SignatureRefusal::Malformed)?,
        })
    }

    /// Who the request says signed it (checked by [`Verifier::verify`]).
    pub fn claimed(&self) -> Identity {
        self.certificate.who
    }

    /// Refuses a timestamp out of the window around `now_ms`.
    pub fn fresh(&self, now_ms: u64) -> Result<(), SignatureRefusal> {
        let off = self.ts_ms as i64 - now_ms as i64;
        if off.unsigned_abs() > MAX_SKEW.as_millis() as u64 {
            return Err(SignatureRefusal::Stale(off / 1000));
        }
        Ok(())
    }
}

/// The four parts of `text` separated by `sep`; `Malformed` for any other count.
fn four(text: &str, sep: char) -> Result<[&str; 4], SignatureRefusal> {
    let mut parts = text.split(sep);
    match (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) {
        (Some(a), Some(b), Some(c), Some(d), None) => Ok([a, b, c, d]),
        _ => Err(SignatureRefusal::Malformed),
    }
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.is_ascii() {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
        .collect()
}

impl Verifier {
    /// A verifier of certificates of the authority whose public key is `ca`.
    pub fn new(ca: [u8; 32]) -> Self {
        Verifier {
            ca,
            seen: Mutex::default(),
            checked: Mutex::default(),
        }
    }

    pub fn ca(&self) -> &[u8; 32] {
        &self.ca
    }

    fn certificate_holds(&self, p: &Presented) -> bool {
        let mut checked = self.checked.lock().unwrap_or_else(|e| e.into_inner());
        if checked.contains(p.certificate_text) {
            return true;
        }
        if !p.certificate.signed_by(&self.ca) {
            return false;
        }
        if checked.len() >= CHECKED_CERTIFICATES {
            checked.clear();
        }
        checked.insert(p.certificate_text.to_owned());
        true
    }

    /// Checks a request signed as `p` for this callee (`s`) at `now_ms`: fresh, its
    /// certificate the cluster authority's, signed by the certificate's key, and its
    /// nonce not seen before (then remembered). Returns the signer.
    pub fn verify(
        &self,
        p: &Presented,
        s: &Signed,
        now_ms: u64,
    ) -> Result<Identity, SignatureRefusal> {
        p.fresh(now_ms)?;
        if !self.certificate_holds(p) {
            return Err(SignatureRefusal::Bad);
        }
        UnparsedPublicKey::new(&ED25519, p.certificate.public_key())
            .verify(
                &message(p.certificate_text, s, p.ts_ms, p.nonce),
                &p.signature,
            )
            .map_err(|_| SignatureRefusal::Bad)?;
        let nonce = u128::from_str_radix(p.nonce, 16).map_err(|_| SignatureRefusal::Malformed)?;
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .admit(nonce, p.ts_ms, now_ms)?;
        Ok(p.certificate.who)
    }
}

/// A new random ed25519 seed (32 bytes).
pub fn new_seed() -> Result<[u8; 32]> {
    use ring::rand::SecureRandom as _;
    let mut seed = [0u8; 32];
    ring::rand::SystemRandom::new()
        .fill(&mut seed)
        .map_err(|_| anyhow!("no randomness for a key"))?;
    Ok(seed)
}

#[cfg(test)]
mod tests;
