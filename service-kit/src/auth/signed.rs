//! Signed internal requests (issue 32): with per-role credential files, a role never
//! sends its credential to a callee. Each role holds its own ed25519 private key and
//! every role's public key; each internal request carries one header,
//! [`SIGNATURE_HEADER`], holding the signer's role, a timestamp, a random nonce and
//! the signature over
//!
//! ```text
//! megha-request-v1 \n <signer role> \n <callee role> \n <METHOD> \n <path?query> \n
//! <timestamp ms> \n <nonce> \n <SHA-256 of the body, hex>
//! ```
//!
//! So a callee holds nothing it could reuse (public keys only: an LM cannot pose as a
//! GM to another LM, a worker host that reads an LM's request cannot make a new one),
//! a captured request cannot be altered (method, path, query and body are signed),
//! cannot be sent to another role (the callee's role is signed), and cannot be
//! replayed: the callee refuses a timestamp more than [`MAX_SKEW`] away from its own
//! clock, and a nonce it has already seen within that window ([`NonceCache`],
//! bounded). Each retry of a request is signed anew (a new nonce).

use crate::roles::Role;
use anyhow::{anyhow, bail, Result};
use ring::signature::{Ed25519KeyPair, KeyPair as _, UnparsedPublicKey, ED25519};
use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The header of a signed request: `<signer role>;<timestamp ms>;<nonce hex>;<signature hex>`.
pub const SIGNATURE_HEADER: &str = "x-megha-signature";
/// How far a request's timestamp may be from the callee's clock (either way): the
/// window within which its nonce is remembered. Hosts' clocks must agree this well.
pub const MAX_SKEW: Duration = Duration::from_secs(60);
/// The most nonces a callee remembers (about 40 MiB at most): within [`MAX_SKEW`],
/// more signed requests than this are refused as [`SignatureRefusal::Busy`] rather
/// than forgetting a nonce early.
pub const NONCE_CAPACITY: usize = 1 << 20;

/// Milliseconds since the Unix epoch, by this host's clock.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// This process's signing key (its role's private key). `Debug` hides it.
pub struct Signer {
    role: Role,
    key: Ed25519KeyPair,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Signer({}, <private key>)", self.role)
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

fn message(signer: Role, s: &Signed, ts_ms: u64, nonce: &str) -> Vec<u8> {
    let digest = crate::roles::hex(&crate::roles::digest(s.body));
    format!(
        "megha-request-v1\n{signer}\n{}\n{}\n{}\n{ts_ms}\n{nonce}\n{digest}",
        s.callee, s.method, s.target
    )
    .into_bytes()
}

impl Signer {
    /// The signer of `role` from its 32-byte seed; `public` is checked against it.
    pub fn from_seed(role: Role, seed: &[u8; 32]) -> Result<Self> {
        let key = Ed25519KeyPair::from_seed_unchecked(seed)
            .map_err(|_| anyhow!("not an ed25519 seed"))?;
        Ok(Signer { role, key })
    }

    pub fn role(&self) -> Role {
        self.role
    }

    /// This key's public half.
    pub fn public_key(&self) -> [u8; 32] {
        let mut out = [0u8; 32];
        out.copy_from_slice(self.key.public_key().as_ref());
        out
    }

    /// The [`SIGNATURE_HEADER`] value for `s`, at `ts_ms` with a fresh nonce.
    pub fn header(&self, s: &Signed, ts_ms: u64) -> Result<String> {
        use ring::rand::SecureRandom as _;
        let mut nonce = [0u8; 16];
        ring::rand::SystemRandom::new()
            .fill(&mut nonce)
            .map_err(|_| anyhow!("no randomness for a request nonce"))?;
        let nonce = crate::roles::hex(&nonce);
        let sig = self.key.sign(&message(self.role, s, ts_ms, &nonce));
        Ok(format!(
            "{};{ts_ms};{nonce};{}",
            self.role,
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
    /// The header is not `<role>;<ms>;<nonce>;<signature>`, or names no known role.
    Malformed,
    /// The signature does not verify under the named role's public key (altered,
    /// signed by another key, or for another callee).
    Bad,
    /// The timestamp is further than [`MAX_SKEW`] from this host's clock (by this
    /// many seconds, signed: positive is in the future).
    Stale(i64),
    /// This nonce was seen already: a replay.
    Replayed,
    /// The nonce cache is full (more than [`NONCE_CAPACITY`] requests in the window).
    Busy,
}

/// The public keys of every role and the nonces seen: what a callee checks a signed
/// request with.
pub struct Verifier {
    keys: Vec<(Role, [u8; 32])>,
    seen: Mutex<NonceCache>,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Verifier(gm, lm, worker)")
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
    /// Records `nonce` (timestamped `ts_ms`); false if it was seen already.
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

/// A parsed [`SIGNATURE_HEADER`].
#[derive(Debug)]
pub struct Presented<'a> {
    pub signer: Role,
    ts_ms: u64,
    nonce: &'a str,
    signature: Vec<u8>,
}

impl<'a> Presented<'a> {
    /// Parses the header's value; `Malformed` when it is not one.
    pub fn parse(value: &'a [u8]) -> Result<Self, SignatureRefusal> {
        let text = std::str::from_utf8(value).map_err(|_| SignatureRefusal::Malformed)?;
        let mut parts = text.trim().split(';');
        let (Some(role), Some(ts), Some(nonce), Some(sig), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return Err(SignatureRefusal::Malformed);
        };
        let signer = Role::ALL
            .iter()
            .copied()
            .find(|r| r.name() == role)
            .ok_or(SignatureRefusal::Malformed)?;
        let ts_ms = ts.parse().map_err(|_| SignatureRefusal::Malformed)?;
        if nonce.len() != 32 || !nonce.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(SignatureRefusal::Malformed);
        }
        let signature = unhex(sig).ok_or(SignatureRefusal::Malformed)?;
        Ok(Presented {
            signer,
            ts_ms,
            nonce,
            signature,
        })
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
    /// A verifier of these roles' public keys; two roles with one key are refused.
    pub fn new(keys: Vec<(Role, [u8; 32])>) -> Result<Self> {
        let distinct: HashSet<_> = keys.iter().map(|(_, k)| *k).collect();
        if distinct.len() != keys.len() {
            bail!("two roles have the same public key; each role needs its own");
        }
        Ok(Verifier {
            keys,
            seen: Mutex::default(),
        })
    }

    /// The public key of `role`, if known.
    pub fn key_of(&self, role: Role) -> Option<&[u8; 32]> {
        self.keys.iter().find(|(r, _)| *r == role).map(|(_, k)| k)
    }

    /// Checks a request signed as `p` for this callee (`s`) at `now_ms`: fresh,
    /// signed by the key of the role it names, and its nonce not seen before (then
    /// remembered). Returns the signer's role.
    pub fn verify(&self, p: &Presented, s: &Signed, now_ms: u64) -> Result<Role, SignatureRefusal> {
        p.fresh(now_ms)?;
        let key = self.key_of(p.signer).ok_or(SignatureRefusal::Malformed)?;
        UnparsedPublicKey::new(&ED25519, key)
            .verify(&message(p.signer, s, p.ts_ms, p.nonce), &p.signature)
            .map_err(|_| SignatureRefusal::Bad)?;
        let nonce = u128::from_str_radix(p.nonce, 16).map_err(|_| SignatureRefusal::Malformed)?;
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .admit(nonce, p.ts_ms, now_ms)?;
        Ok(p.signer)
    }

    /// Nonces remembered now (for `/metrics`).
    pub fn nonces(&self) -> usize {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).len()
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
mod tests {
    use super::*;

    fn signer(role: Role) -> Signer {
        Signer::from_seed(role, &new_seed().expect("seed")).expect("key")
    }

    fn req<'a>(callee: Role, target: &'a str, body: &'a [u8]) -> Signed<'a> {
        Signed {
            callee,
            method: "POST",
            target,
            body,
        }
    }

    #[test]
    fn a_signed_request_verifies_once_and_only_as_signed() {
        let (gm, lm, worker) = (signer(Role::Gm), signer(Role::Lm), signer(Role::Worker));
        let v = Verifier::new(vec![
            (Role::Gm, gm.public_key()),
            (Role::Lm, lm.public_key()),
            (Role::Worker, worker.public_key()),
        ])
        .expect("verifier");
        let now = 1_800_000_000_000;
        let s = req(Role::Lm, "/v1/messages", b"launch");
        let h = gm.header(&s, now).expect("sign");
        assert!(!h.contains("launch"));
        let p = Presented::parse(h.as_bytes()).expect("parse");
        assert_eq!(v.verify(&p, &s, now + 5), Ok(Role::Gm));
        // The same bytes again: a replay.
        assert_eq!(v.verify(&p, &s, now + 6), Err(SignatureRefusal::Replayed));
        // Altered body, path, method, callee: bad (checked before the nonce).
        let h = gm.header(&s, now).expect("sign");
        let p = Presented::parse(h.as_bytes()).expect("parse");
        for other in [
            req(Role::Lm, "/v1/messages", b"launcx"),
            req(Role::Lm, "/v1/messages?x=1", b"launch"),
            req(Role::Worker, "/v1/messages", b"launch"),
            Signed {
                method: "PUT",
                ..req(Role::Lm, "/v1/messages", b"launch")
            },
        ] {
            assert_eq!(v.verify(&p, &other, now), Err(SignatureRefusal::Bad));
        }
        // An LM's key claiming to be the GM: bad.
        let forged = lm.header(&s, now).expect("sign").replacen("lm;", "gm;", 1);
        let p = Presented::parse(forged.as_bytes()).expect("parse");
        assert_eq!(v.verify(&p, &s, now), Err(SignatureRefusal::Bad));
        // Stale either way.
        let h = gm.header(&s, now - 61_000).expect("sign");
        let p = Presented::parse(h.as_bytes()).expect("parse");
        assert_eq!(v.verify(&p, &s, now), Err(SignatureRefusal::Stale(-61)));
        let h = gm.header(&s, now + 90_000).expect("sign");
        let p = Presented::parse(h.as_bytes()).expect("parse");
        assert_eq!(v.verify(&p, &s, now), Err(SignatureRefusal::Stale(90)));
        // Garbage.
        for bad in [
            "",
            "gm;1;2",
            "boss;1;00000000000000000000000000000000;00",
            "gm;x;00000000000000000000000000000000;00",
            "gm;1;0000;00",
            "gm;1;00000000000000000000000000000000;0g",
        ] {
            assert_eq!(
                Presented::parse(bad.as_bytes()).map(|_| ()),
                Err(SignatureRefusal::Malformed),
                "{bad}"
            );
        }
        assert!(Verifier::new(vec![
            (Role::Gm, gm.public_key()),
            (Role::Lm, gm.public_key())
        ])
        .is_err());
        assert!(!format!("{gm:?}").contains(&crate::roles::hex(&gm.public_key())[..8]));
    }

    #[test]
    fn nonces_are_forgotten_only_once_out_of_the_window() {
        let mut c = NonceCache::default();
        let now = 1_000_000_000;
        assert_eq!(c.admit(1, now, now), Ok(()));
        assert_eq!(
            c.admit(1, now, now + 59_000),
            Err(SignatureRefusal::Replayed)
        );
        assert_eq!(c.admit(2, now + 59_000, now + 59_000), Ok(()));
        // 61 s later, nonce 1 is gone (a request that old is stale anyway); 2 is kept.
        assert_eq!(c.admit(3, now + 61_000, now + 61_000), Ok(()));
        assert_eq!(c.len(), 2);
        assert_eq!(
            c.admit(2, now + 61_000, now + 61_000),
            Err(SignatureRefusal::Replayed)
        );
    }
}
