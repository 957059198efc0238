//! Web tools (in progress).
