//! Unique ids for events and invocations.

/// A new random id (a UUID v4 in its hyphenated form).
pub(crate) fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}
