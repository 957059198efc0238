//! A session's title: what a person recognises a stored conversation by in a list.

use toolbelt_model::Role;

use crate::{Event, EventKind};

/// The most characters a [`title`] keeps before it is cut with an ellipsis.
pub const TITLE_CHARS: usize = 60;

/// The title of a session with these events (oldest first): its first user prompt on one
/// line (every run of whitespace, line breaks included, as one space) and cut to
/// [`TITLE_CHARS`] characters with `…`; `None` when no user prompt is stored (a graph run,
/// a session emptied by a failed start).
///
/// Derived from the events rather than stored, so every store (and sessions written
/// before titles existed) has one, and the command line, the chat's `/sessions` and the
/// web UI show the same text. The title is the user's own text, which may hold anything:
/// it is not escaped here, each front end escapes it as it shows it.
pub fn title(events: &[Event]) -> Option<String> {
    events.iter().find_map(|event| match &event.kind {
        EventKind::UserInput { message }
            if message.role == Role::User && !message.content.trim().is_empty() =>
        {
            Some(one_line(&message.content))
        }
        _ => None,
    })
}

/// `text` on one line, cut to [`TITLE_CHARS`] characters with `…`.
fn one_line(text: &str) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    let line = words.join(" ");
    if line.chars().count() <= TITLE_CHARS {
        return line;
    }
    let mut cut: String = line.chars().take(TITLE_CHARS).collect();
    cut.truncate(cut.trim_end().len());
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolbelt_model::Message;

    fn input(message: Message) -> Event {
        Event::new("inv", None, "user", EventKind::UserInput { message })
    }

    #[test]
    fn the_title_is_the_first_user_prompt_on_one_line() {
        let events = [
            input(Message::system("be brief")),
            input(Message::user("fix the\n\tbuild  please")),
            input(Message::user("and then the tests")),
        ];
        assert_eq!(title(&events).as_deref(), Some("fix the build please"));
        assert_eq!(title(&[]), None);
    }

    #[test]
    fn a_long_prompt_is_cut_with_an_ellipsis() {
        let long = "word ".repeat(40);
        let cut = title(&[input(Message::user(long))]).unwrap();
        assert!(cut.ends_with('…'), "{cut}");
        assert!(cut.chars().count() <= TITLE_CHARS + 1, "{cut}");
    }
}
