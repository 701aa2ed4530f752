//! Unit tests of signed requests: every refusal, the nonce window, certificates.

use super::*;

fn authority() -> Authority {
    Authority::from_seed(&new_seed().expect("seed")).expect("ca")
}

fn signer(ca: &Authority, role: Role, id: Option<u16>) -> Signer {
    Signer::issue(ca, Identity { role, id }).expect("issue").1
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
    let ca = authority();
    let (gm, lm, lm1) = (
        signer(&ca, Role::Gm, Some(0)),
        signer(&ca, Role::Lm, None),
        signer(&ca, Role::Lm, Some(1)),
    );
    let v = Verifier::new(ca.public_key());
    let now = 1_800_000_000_000;
    let s = req(Role::Lm, "/v1/messages", b"launch");
    let h = gm.header(&s, now).expect("sign");
    assert!(!h.contains("launch"));
    let p = Presented::parse(h.as_bytes()).expect("parse");
    let gm0 = Identity {
        role: Role::Gm,
        id: Some(0),
    };
    assert_eq!(p.claimed(), gm0);
    assert_eq!(v.verify(&p, &s, now + 5), Ok(gm0));
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
    // An LM's key with the GM's certificate, or LM 1's certificate rewritten to
    // claim LM 0 or any LM: bad.
    let forged = lm
        .header(&s, now)
        .expect("sign")
        .replacen(lm.certificate(), gm.certificate(), 1);
    let p = Presented::parse(forged.as_bytes()).expect("parse");
    assert_eq!(v.verify(&p, &s, now), Err(SignatureRefusal::Bad));
    for claim in ["lm.0.", "lm.*."] {
        let forged = lm1
            .header(&s, now)
            .expect("sign")
            .replacen("lm.1.", claim, 1);
        let p = Presented::parse(forged.as_bytes()).expect("parse");
        assert_eq!(v.verify(&p, &s, now), Err(SignatureRefusal::Bad), "{claim}");
    }
    // A certificate of another authority: bad.
    let stranger = signer(&authority(), Role::Gm, Some(0));
    let h = stranger.header(&s, now).expect("sign");
    let p = Presented::parse(h.as_bytes()).expect("parse");
    assert_eq!(v.verify(&p, &s, now), Err(SignatureRefusal::Bad));
    // Stale either way.
    let h = gm.header(&s, now - 61_000).expect("sign");
    let p = Presented::parse(h.as_bytes()).expect("parse");
    assert_eq!(v.verify(&p, &s, now), Err(SignatureRefusal::Stale(-61)));
    let h = gm.header(&s, now + 90_000).expect("sign");
    let p = Presented::parse(h.as_bytes()).expect("parse");
    assert_eq!(v.verify(&p, &s, now), Err(SignatureRefusal::Stale(90)));
    // Garbage.
    let cert = gm.certificate();
    for bad in [
        String::new(),
        "gm;1;2".to_owned(),
        format!(
            "boss.0.{};1;00000000000000000000000000000000;00",
            &cert[5..]
        ),
        format!("{cert};x;00000000000000000000000000000000;00"),
        format!("{cert};1;0000;00"),
        format!("{cert};1;00000000000000000000000000000000;0g"),
        format!("gm.x.{};1;00000000000000000000000000000000;00", &cert[5..]),
    ] {
        assert_eq!(
            Presented::parse(bad.as_bytes()).map(|_| ()),
            Err(SignatureRefusal::Malformed),
            "{bad}"
        );
    }
    assert!(!format!("{gm:?}").contains(&crate::roles::hex(&gm.public_key())[..8]));
}

#[test]
fn a_signer_needs_its_own_certificate_of_its_authority() {
    let ca = authority();
    let (seed, gm) = Signer::issue(
        &ca,
        Identity {
            role: Role::Gm,
            id: None,
        },
    )
    .expect("issue");
    assert!(Signer::new(&seed, gm.certificate(), &ca.public_key()).is_ok());
    let other = signer(&ca, Role::Gm, None);
    let err = Signer::new(&seed, other.certificate(), &ca.public_key()).expect_err("not its");
    assert!(err.to_string().contains("key"), "{err}");
    let err =
        Signer::new(&seed, gm.certificate(), &authority().public_key()).expect_err("other ca");
    assert!(err.to_string().contains("certificate"), "{err}");
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
