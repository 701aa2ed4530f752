//! Cross-crate integration tests live in `tests/`; this library only holds shared helpers.
