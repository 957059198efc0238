//! Tool search: pick the few tools a turn needs from hundreds.
//!
//! (Crate docs with an example: written by the helpers building it.)

pub mod embed;
mod error;

pub use error::SearchError;
