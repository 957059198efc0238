//! Tool search: pick the few tools a turn needs from hundreds.
//!
//! (Crate docs with an example: written by the helpers building it.)

mod bm25;
mod catalog;
mod doc;
pub mod embed;
mod error;
mod fuse;
mod index;
pub mod tokenize;

pub use bm25::{Bm25Index, Tuning};
pub use catalog::parse_catalog;
pub use doc::{Hit, ToolDoc};
pub use error::SearchError;
pub use fuse::{DEFAULT_RRF_K, reciprocal_rank_fusion};
pub use index::{Method, SyncStats, ToolIndex};
