//! The actor's link to each LM: requests out, answers back (see
//! [`service_kit::links`]).

use common::protocol::{GmToLm, LmToGm};
use service_kit::links::Link;

/// How the GM reaches one LM: any [`GmToLm`] request, answered by an [`LmToGm`].
pub type LmLink = Link<GmToLm, LmToGm>;
