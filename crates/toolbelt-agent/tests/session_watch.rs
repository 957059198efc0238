//! Following a SQLite session file that another connection (another process) writes: the
//! watcher API the web UI polls (`events_after`, `last_seq`, `sessions`).

use toolbelt_agent::session::{SessionSummary, SqliteSessionService};
use toolbelt_agent::{Event, EventKind, SessionKey, SessionService};
use toolbelt_model::Message;

fn input(text: &str) -> Event {
    Event::new(
        "inv",
        None,
        "user",
        EventKind::UserInput {
            message: Message::user(text),
        },
    )
}

fn texts(events: &[toolbelt_agent::session::StoredEvent]) -> Vec<String> {
    events
        .iter()
        .map(|e| match &e.event.kind {
            EventKind::UserInput { message } => message.content.clone(),
            other => other.type_name().to_string(),
        })
        .collect()
}

#[tokio::test]
async fn a_watcher_reads_what_another_connection_commits_in_commit_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    let writer = SqliteSessionService::open(&path).unwrap();
    let watcher = SqliteSessionService::open(&path).unwrap();
    assert_eq!(watcher.last_seq().await.unwrap(), 0);
    assert!(watcher.events_after(0, 10).await.unwrap().is_empty());

    let a = SessionKey::new("app", "u", "a");
    let b = SessionKey::new("other", "v", "b");
    writer.append_event(&a, &input("one")).await.unwrap();
    writer.append_event(&b, &input("two")).await.unwrap();
    writer.append_event(&a, &input("three")).await.unwrap();

    // A page at a time, across sessions, in the order they were committed.
    let first = watcher.events_after(0, 2).await.unwrap();
    assert_eq!(texts(&first), ["one", "two"]);
    assert_eq!(first[0].key, a);
    assert_eq!(first[1].key, b);
    assert!(first[0].seq < first[1].seq);
    let rest = watcher.events_after(first[1].seq, 10).await.unwrap();
    assert_eq!(texts(&rest), ["three"]);
    assert_eq!(watcher.last_seq().await.unwrap(), rest[0].seq);
    assert!(
        watcher
            .events_after(rest[0].seq, 10)
            .await
            .unwrap()
            .is_empty()
    );

    let sessions = watcher.sessions().await.unwrap();
    let summary = |key: &SessionKey| -> SessionSummary {
        sessions.iter().find(|s| &s.key == key).unwrap().clone()
    };
    assert_eq!(sessions.len(), 2);
    assert_eq!(summary(&a).events, 2);
    assert_eq!(summary(&b).events, 1);
    assert!(summary(&a).updated_ms >= summary(&a).created_ms);
}

#[tokio::test]
async fn a_row_no_version_can_read_is_skipped_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    let store = SqliteSessionService::open(&path).unwrap();
    let key = SessionKey::new("app", "u", "s");
    store.append_event(&key, &input("before")).await.unwrap();
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute(
            "INSERT INTO events (app, user_id, session_id, event_id, invocation_id, author,
                                 object, body, timestamp_ms)
             VALUES ('app', 'u', 's', 'x', 'inv', 'user', 'future_kind', '{\"not\":\"an event\"}', 0)",
            [],
        )
        .unwrap();
    }
    store.append_event(&key, &input("after")).await.unwrap();
    let events = store.events_after(0, 10).await.unwrap();
    assert_eq!(texts(&events), ["before", "after"]);
    assert_eq!(
        store.last_seq().await.unwrap(),
        3,
        "the skipped row still counts"
    );
}
