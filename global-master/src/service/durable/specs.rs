//! A job's spec as submitted (the `POST /v1/jobs` body), kept so that it can be read
//! back (`GET /v1/jobs/{id}/spec`, `megha describe`) and submitted again (`megha
//! resubmit`), also after the job ended and after a GM restart: gzip-compressed, at
//! most [`MAX_PACKED`] bytes each (a larger one is not kept; the answer says so),
//! in the tracker while it holds the job and in the journal's `specs` table for the
//! last [`SPECS_KEPT`] jobs (see [`crate::service::durable::journal`]). Worst case
//! on disk: [`SPECS_KEPT`] x [`MAX_PACKED`] = 640 MiB; a job array of identical
//! tasks packs to a few hundred bytes.

use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use std::io::{Read as _, Write as _};
use std::sync::Arc;

/// The largest packed spec kept.
pub const MAX_PACKED: usize = 64 * 1024;
/// Specs the journal keeps (the oldest jobs' go first).
pub const SPECS_KEPT: u64 = 10_000;

/// A packed spec, or why it was not kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Packed {
    Kept(Arc<[u8]>),
    TooLarge { packed: usize },
}

/// Packs `body` (the submission's JSON).
pub fn pack(body: &[u8]) -> Packed {
    let mut out = GzEncoder::new(Vec::new(), flate2::Compression::default());
    let packed = out.write_all(body).and_then(|()| out.finish());
    match packed {
        Ok(p) if p.len() <= MAX_PACKED => Packed::Kept(p.into()),
        Ok(p) => Packed::TooLarge { packed: p.len() },
        // Writing to memory does not fail; if it did, nothing is kept.
        Err(_) => Packed::TooLarge { packed: usize::MAX },
    }
}

/// The body a packed spec holds.
pub fn unpack(packed: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    GzDecoder::new(packed).read_to_end(&mut body)?;
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_round_trips_and_a_huge_one_is_not_kept() {
        let body = br#"{"tasks":[{"resources":{"cpu_millis":500,"memory_mb":64}}]}"#;
        let Packed::Kept(p) = pack(body) else {
            panic!("a small spec is kept")
        };
        assert_eq!(unpack(&p).expect("unpacks"), body);
        // An array of identical tasks packs small.
        let task = r#"{"resources":{"cpu_millis":500,"memory_mb":64},"executor":{"type":"exec","command":["true"]}},"#;
        let array = format!("{{\"tasks\":[{}{{}}]}}", task.repeat(10_000));
        assert!(matches!(pack(array.as_bytes()), Packed::Kept(p) if p.len() < 8 * 1024));
        // Incompressible bytes beyond the cap are not.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let noise: Vec<u8> = (0..200_000)
            .map(|_| {
                // xorshift64: bytes gzip cannot shrink.
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 32) as u8
            })
            .collect();
        assert!(matches!(pack(&noise), Packed::TooLarge { packed } if packed > MAX_PACKED));
    }
}
