//! How a request is refused: the HTTP status, the field at fault and why
//! ([`ApiError`]), shared by every parser of [`crate::service::admission`].

use serde::Serialize;

/// A refusal: HTTP status, the field at fault (JSON path) and why.
#[derive(utoipa::ToSchema, Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApiError {
    #[serde(skip)]
    pub status: u16,
    pub field: String,
    pub error: String,
}

impl ApiError {
    pub fn new(status: u16, field: impl Into<String>, error: impl Into<String>) -> Self {
        ApiError {
            status,
            field: field.into(),
            error: error.into(),
        }
    }
}

/// A path parameter as a number: the handlers and the ownership check
/// ([`super::users`]) read ids with this one function.
pub fn parse_id<T: std::str::FromStr>(field: &str, raw: &str) -> Result<T, ApiError> {
    raw.parse()
        .map_err(|_| ApiError::new(400, field, format!("`{raw}` is not a valid {field}")))
}
