//! One status line on stderr for long operations: a spinner with the elapsed seconds for
//! waits of unknown length (the model, a long Grep), `done/total` for counted work (an index
//! build), and a countdown laid over either (a retry's wait).
//!
//! It is drawn only when stderr is a terminal and the command does not print JSON, so pipes
//! and CI logs never see a `\r` or an escape sequence. A thread of its own redraws it ten
//! times a second at most (every [`TICK`]) while there is something to show, so a worker
//! busy with CPU-bound work (embedding a catalog) does not freeze it and a fast loop of
//! updates costs no terminal writes. Anything else written to stderr or to the same
//! terminal goes through [`Progress::println`], or follows [`Progress::hide`] or
//! [`Progress::pause`]: each clears the line first, so it never mixes with other output.
//!
//! ```ignore
//! let progress = Progress::on_stderr(args.json);
//! progress.count("embedding tools", 0, docs.len() as u64);
//! for (i, doc) in docs.iter().enumerate() {
//!     embed(doc)?;
//!     progress.count("embedding tools", i as u64 + 1, docs.len() as u64);
//! }
//! progress.hide();
//! ```

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The shortest time between two draws.
pub const TICK: Duration = Duration::from_millis(100);
/// Elapsed time is shown once a wait has lasted this long.
const SHOW_ELAPSED_AFTER: Duration = Duration::from_secs(1);
/// Clears the terminal line the cursor is on and returns to its start.
const CLEAR: &[u8] = b"\r\x1b[2K";
const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/// A status line on stderr (see the module doc). Clones share the line.
#[derive(Clone)]
pub struct Progress {
    line: Arc<Mutex<Line>>,
    enabled: bool,
}

impl Progress {
    /// A status line that draws when stderr is a terminal (not `TERM=dumb`) and `json` is
    /// false; otherwise every call but [`Progress::println`] does nothing.
    pub fn on_stderr(json: bool) -> Self {
        let dumb = std::env::var_os("TERM").is_some_and(|t| t == "dumb");
        Self::new(!json && !dumb && std::io::stderr().is_terminal())
    }

    /// A status line that draws only if `enabled`.
    pub fn new(enabled: bool) -> Self {
        Self {
            line: Arc::default(),
            enabled,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Line> {
        lock(&self.line)
    }

    /// Spins with `label`, and the seconds since now once they pass one.
    pub fn spin(&self, label: impl Into<String>) {
        self.spin_since(label, Instant::now());
    }

    /// Spins with `label`, and the seconds since `since` once they pass one (a wait that
    /// started before its label changed keeps its clock).
    pub fn spin_since(&self, label: impl Into<String>, since: Instant) {
        self.set(Status::Spin {
            label: label.into(),
            since,
        });
    }

    /// Shows `label done/total` (counted work).
    pub fn count(&self, label: impl Into<String>, done: u64, total: u64) {
        self.set(Status::Count {
            label: label.into(),
            done,
            total,
        });
    }

    /// Shows `label in N s`, counting down to `until`, over what the line shows; when
    /// `until` has passed, the line shows that again (its clock still running). Only over
    /// something: on a hidden line (text may be streaming where it would be) it waits for
    /// the next status, and shows then if `until` has not passed.
    pub fn countdown(&self, label: impl Into<String>, until: Instant) {
        if !self.enabled {
            return;
        }
        self.lock().overlay = Some((label.into(), until));
        self.start_ticking();
    }

    fn set(&self, status: Status) {
        if !self.enabled {
            return;
        }
        self.lock().status = Some(status);
        self.start_ticking();
    }

    /// Starts the drawing thread unless it runs; it ends by itself once nothing is shown.
    fn start_ticking(&self) {
        let mut line = self.lock();
        if line.ticking {
            return;
        }
        line.ticking = true;
        let shared = self.line.clone();
        let started = std::thread::Builder::new()
            .name("progress".into())
            .spawn(move || {
                loop {
                    {
                        let mut line = lock(&shared);
                        if !line.showing() {
                            line.ticking = false;
                            return;
                        }
                        let mut err = std::io::stderr().lock();
                        line.draw(Instant::now(), &mut err);
                        let _ = err.flush();
                    }
                    std::thread::sleep(TICK);
                }
            });
        // Without a thread there is no line: the work itself goes on.
        if started.is_err() {
            line.ticking = false;
        }
    }

    /// Clears the line and forgets what it showed.
    pub fn hide(&self) {
        if !self.enabled {
            return;
        }
        let mut line = self.lock();
        line.status = None;
        line.overlay = None;
        let mut err = std::io::stderr().lock();
        line.clear(&mut err);
        let _ = err.flush();
    }

    /// Writes `text` and a newline on stderr above the line (which comes back on the next
    /// tick).
    pub fn println(&self, text: &str) {
        let mut line = self.enabled.then(|| self.lock());
        let mut err = std::io::stderr().lock();
        if let Some(line) = line.as_mut() {
            line.clear(&mut err);
        }
        let _ = writeln!(err, "{text}");
        let _ = err.flush();
    }

    /// Keeps the line off the terminal until the guard is dropped (while a question waits
    /// for its answer).
    pub fn pause(&self) -> Paused {
        if self.enabled {
            let mut line = self.lock();
            line.paused += 1;
            let mut err = std::io::stderr().lock();
            line.clear(&mut err);
            let _ = err.flush();
        }
        Paused(self.clone())
    }
}

fn lock(line: &Mutex<Line>) -> MutexGuard<'_, Line> {
    line.lock().unwrap_or_else(|p| p.into_inner())
}

/// Lets the line draw again when dropped.
pub struct Paused(Progress);

impl Drop for Paused {
    fn drop(&mut self) {
        if self.0.enabled {
            let mut line = self.0.lock();
            line.paused = line.paused.saturating_sub(1);
        }
    }
}

/// What the line shows.
#[derive(Debug, Clone, PartialEq)]
enum Status {
    Spin {
        label: String,
        since: Instant,
    },
    Count {
        label: String,
        done: u64,
        total: u64,
    },
}

/// The line's state and the decisions about drawing it, apart from the terminal so they
/// can be tested on a buffer.
#[derive(Debug, Default)]
struct Line {
    status: Option<Status>,
    /// A countdown shown over the status until its instant.
    overlay: Option<(String, Instant)>,
    /// How many pauses are open (nothing is drawn meanwhile).
    paused: usize,
    /// Whether something is on the terminal now (only then is there a line to clear).
    drawn: bool,
    /// When the line was last drawn.
    last_draw: Option<Instant>,
    frame: usize,
    /// Whether the drawing thread runs.
    ticking: bool,
}

impl Line {
    fn showing(&self) -> bool {
        self.status.is_some()
    }

    /// The text of the line at `now` (without the spinner frame), if any.
    fn text(&self, now: Instant) -> Option<String> {
        let status = self.status.as_ref()?;
        if let Some((label, until)) = &self.overlay
            && *until > now
        {
            let left = until.duration_since(now).as_secs_f64().ceil();
            return Some(format!("{label} in {left} s"));
        }
        match status {
            Status::Spin { label, since } => {
                let elapsed = now.saturating_duration_since(*since);
                Some(if elapsed >= SHOW_ELAPSED_AFTER {
                    format!("{label} {} s", elapsed.as_secs())
                } else {
                    label.clone()
                })
            }
            Status::Count { label, done, total } => Some(format!("{label} {done}/{total}")),
        }
    }

    /// Draws the line unless it was drawn less than a [`TICK`] ago or is paused; returns
    /// whether it wrote.
    fn draw(&mut self, now: Instant, out: &mut impl Write) -> bool {
        if self.paused > 0 {
            return false;
        }
        if let Some(last) = self.last_draw
            && now.saturating_duration_since(last) < TICK
        {
            return false;
        }
        if let Some((_, until)) = &self.overlay
            && *until <= now
        {
            self.overlay = None;
        }
        let Some(text) = self.text(now) else {
            self.clear(out);
            return false;
        };
        let frame = FRAMES[self.frame % FRAMES.len()];
        self.frame += 1;
        let _ = out.write_all(CLEAR);
        let _ = write!(out, "{frame} {text}");
        self.drawn = true;
        self.last_draw = Some(now);
        true
    }

    /// Clears the line if something is drawn.
    fn clear(&mut self, out: &mut impl Write) {
        if self.drawn {
            let _ = out.write_all(CLEAR);
            self.drawn = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spinning(label: &str, since: Instant) -> Line {
        Line {
            status: Some(Status::Spin {
                label: label.into(),
                since,
            }),
            ..Line::default()
        }
    }

    fn written(out: &mut Vec<u8>) -> String {
        String::from_utf8(std::mem::take(out)).unwrap()
    }

    #[test]
    fn draws_at_most_once_a_tick_and_clears_only_what_it_drew() {
        let t0 = Instant::now();
        let mut line = spinning("waiting", t0);
        let mut out = Vec::new();
        assert!(line.draw(t0, &mut out));
        assert_eq!(written(&mut out), "\r\x1b[2K⠋ waiting");
        // A draw less than a tick later writes nothing.
        assert!(!line.draw(t0 + TICK / 2, &mut out));
        assert!(out.is_empty());
        // A tick later, the next frame.
        assert!(line.draw(t0 + TICK, &mut out));
        assert_eq!(written(&mut out), "\r\x1b[2K⠙ waiting");
        // Clearing erases the drawn line once; a second clear has nothing to erase.
        line.clear(&mut out);
        assert_eq!(written(&mut out), "\r\x1b[2K");
        line.clear(&mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn a_line_never_drawn_is_never_cleared() {
        let mut line = Line::default();
        let mut out = Vec::new();
        assert!(!line.draw(Instant::now(), &mut out));
        line.clear(&mut out);
        assert!(out.is_empty(), "{out:?}");
    }

    #[test]
    fn a_paused_line_stays_off_the_terminal() {
        let t0 = Instant::now();
        let mut line = spinning("waiting", t0);
        line.paused = 1;
        let mut out = Vec::new();
        assert!(!line.draw(t0, &mut out));
        assert!(out.is_empty());
        line.paused = 0;
        assert!(line.draw(t0, &mut out));
    }

    #[test]
    fn elapsed_seconds_show_after_one_second() {
        let t0 = Instant::now();
        let line = spinning("Grep(pattern=x)", t0);
        assert_eq!(
            line.text(t0 + Duration::from_millis(900)).unwrap(),
            "Grep(pattern=x)"
        );
        assert_eq!(
            line.text(t0 + Duration::from_millis(3_200)).unwrap(),
            "Grep(pattern=x) 3 s"
        );
    }

    #[test]
    fn counted_work_shows_done_of_total() {
        let line = Line {
            status: Some(Status::Count {
                label: "embedding tools".into(),
                done: 40,
                total: 120,
            }),
            ..Line::default()
        };
        assert_eq!(line.text(Instant::now()).unwrap(), "embedding tools 40/120");
    }

    #[test]
    fn a_countdown_covers_the_status_until_it_ends() {
        let t0 = Instant::now();
        let mut line = spinning("waiting for the model…", t0);
        line.overlay = Some((
            "model: HTTP 429, retry 1/3".into(),
            t0 + Duration::from_secs(4),
        ));
        assert_eq!(
            line.text(t0 + Duration::from_millis(100)).unwrap(),
            "model: HTTP 429, retry 1/3 in 4 s"
        );
        assert_eq!(
            line.text(t0 + Duration::from_millis(3_500)).unwrap(),
            "model: HTTP 429, retry 1/3 in 1 s"
        );
        // Once it ends, the status is back with its clock, and the countdown is dropped.
        let mut out = Vec::new();
        assert!(line.draw(t0 + Duration::from_secs(5), &mut out));
        assert!(line.overlay.is_none());
        assert!(written(&mut out).ends_with("waiting for the model… 5 s"));
    }

    #[test]
    fn nothing_to_show_clears_the_line() {
        let t0 = Instant::now();
        let mut line = spinning("waiting", t0);
        let mut out = Vec::new();
        line.draw(t0, &mut out);
        out.clear();
        line.status = None;
        assert!(!line.draw(t0 + TICK, &mut out));
        assert_eq!(written(&mut out), "\r\x1b[2K");
    }

    #[test]
    fn a_disabled_line_does_nothing() {
        let progress = Progress::new(false);
        progress.spin("waiting");
        progress.count("x", 1, 2);
        progress.countdown("y", Instant::now() + Duration::from_secs(1));
        assert!(!progress.lock().showing());
        assert!(!progress.lock().ticking);
    }

    #[test]
    fn a_countdown_on_a_hidden_line_waits_for_the_next_status() {
        let t0 = Instant::now();
        let mut line = Line {
            overlay: Some(("retry 1/3".into(), t0 + Duration::from_secs(2))),
            ..Line::default()
        };
        let mut out = Vec::new();
        assert!(!line.draw(t0, &mut out));
        assert!(out.is_empty(), "nothing drawn over streaming text");
        line.status = Some(Status::Spin {
            label: "waiting".into(),
            since: t0,
        });
        assert!(line.draw(t0 + TICK, &mut out));
        assert!(written(&mut out).ends_with("retry 1/3 in 2 s"));
    }
}
