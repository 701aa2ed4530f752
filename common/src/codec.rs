//! The internal wire codec: one version byte, then bincode 2 (serde, standard config).
//! Changing the codec is a change to this file only.

use serde::{de::DeserializeOwned, Serialize};

/// Bumped whenever an internal message changes shape.
pub const WIRE_VERSION: u8 = 4;

/// The content type internal HTTP bodies carry.
pub const CONTENT_TYPE: &str = "application/x-megha-bincode";

#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("empty message")]
    Empty,
    #[error("wire version {found} is not supported (this build speaks {WIRE_VERSION})")]
    Version { found: u8 },
    #[error("cannot decode message: {0}")]
    Decode(#[from] bincode::error::DecodeError),
    #[error("cannot encode message: {0}")]
    Encode(#[from] bincode::error::EncodeError),
    #[error("{0} trailing bytes after the message")]
    Trailing(usize),
}

pub fn encode<T: Serialize>(msg: &T) -> Result<Vec<u8>, CodecError> {
    let mut out = vec![WIRE_VERSION];
    let body = bincode::serde::encode_to_vec(msg, bincode::config::standard())?;
    out.extend_from_slice(&body);
    Ok(out)
}

pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CodecError> {
    let (&version, body) = bytes.split_first().ok_or(CodecError::Empty)?;
    if version != WIRE_VERSION {
        return Err(CodecError::Version { found: version });
    }
    let (msg, used) = bincode::serde::decode_from_slice(body, bincode::config::standard())?;
    if used != body.len() {
        return Err(CodecError::Trailing(body.len() - used));
    }
    Ok(msg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::{LaunchBatch, LaunchRequest, Placement};
    use crate::{GmId, LmId, Micros, NodeId, Resources, TaskId, TaskSpec};

    #[test]
    fn round_trip_and_version_check() {
        let batch = LaunchBatch {
            gm: GmId(1),
            lm: LmId(2),
            seq: 3,
            requests: vec![LaunchRequest {
                task: TaskSpec::short(TaskId::new(4, 5), Resources::cores(1, 64), Micros(9)),
                node: NodeId(6),
                placement: Placement::Repartition,
            }],
        };
        let bytes = encode(&batch).unwrap();
        assert_eq!(bytes[0], WIRE_VERSION);
        assert_eq!(decode::<LaunchBatch>(&bytes).unwrap(), batch);
        let mut wrong = bytes.clone();
        wrong[0] = 99;
        assert!(matches!(
            decode::<LaunchBatch>(&wrong),
            Err(CodecError::Version { found: 99 })
        ));
        assert!(matches!(decode::<LaunchBatch>(&[]), Err(CodecError::Empty)));
    }

    #[test]
    fn a_response_with_refusals_round_trips() {
        use crate::messages::{LaunchOutcome, LaunchResponse, LmSnapshot, LmTopology};
        use crate::reasons::RejectReason;
        use std::sync::Arc;
        let response = LaunchResponse {
            lm: LmId(1),
            gm: GmId(0),
            seq: 9,
            outcomes: vec![
                (
                    TaskId::new(1, 0),
                    LaunchOutcome::Rejected(RejectReason::UnknownNode),
                ),
                (
                    TaskId::new(1, 1),
                    LaunchOutcome::Rejected(RejectReason::InsufficientResources {
                        free: Resources::new(1, 2),
                    }),
                ),
                (
                    TaskId::new(1, 2),
                    LaunchOutcome::Rejected(RejectReason::Invalid { detail: "x".into() }),
                ),
                (
                    TaskId::new(1, 3),
                    LaunchOutcome::Launched {
                        placement: Placement::Internal,
                    },
                ),
            ],
            snapshot: LmSnapshot {
                lm: LmId(1),
                incarnation: 2,
                version: 3,
                taken_at: Micros(4),
                topology: Arc::new(LmTopology {
                    lm: LmId(1),
                    gms: 1,
                    home: vec![GmId(0)],
                    constraints: vec![crate::ConstraintSet::EMPTY],
                    capacity: vec![Resources::new(1000, 10)],
                }),
                free: Arc::new(vec![Resources::new(1000, 10)]),
                applied_batches: vec![9],
                usage: vec![],
                queue_delay: Arc::new(vec![Micros(7)]),
                queueable_held: Arc::new(vec![Resources::new(500, 5)]),
                jobs: Arc::new(vec![(
                    crate::JobId(1),
                    crate::quota::JobContainers {
                        queueable: 2,
                        guaranteed: 1,
                    },
                )]),
            },
        };
        let bytes = encode(&response).unwrap();
        assert_eq!(decode::<LaunchResponse>(&bytes).unwrap(), response);
    }
}
