//! Signals that stop the command: SIGINT (Ctrl-C) and SIGTERM, waited for in one place.
//!
//! Every command that runs until asked to stop (`serve`, `ui`, a run, a tool call) waits with
//! [`stop_signal`], so each treats both signals alike and reports them with the same exit
//! codes ([`StopSignal::exit_code`]).

use crate::common::{EXIT_INTERRUPTED, EXIT_TERMINATED};

/// Which signal asked the process to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopSignal {
    /// SIGINT (Ctrl-C).
    Interrupt,
    /// SIGTERM.
    Terminate,
}

impl StopSignal {
    /// The exit code that reports it.
    pub fn exit_code(self) -> u8 {
        match self {
            StopSignal::Interrupt => EXIT_INTERRUPTED,
            StopSignal::Terminate => EXIT_TERMINATED,
        }
    }
}

/// Resolves when SIGINT or SIGTERM arrives, saying which.
pub async fn stop_signal() -> StopSignal {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(mut interrupt), Ok(mut terminate)) => tokio::select! {
            _ = interrupt.recv() => StopSignal::Interrupt,
            _ = terminate.recv() => StopSignal::Terminate,
        },
        _ => {
            let _ = tokio::signal::ctrl_c().await;
            StopSignal::Interrupt
        }
    }
}
