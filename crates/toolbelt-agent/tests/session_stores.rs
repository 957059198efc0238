//! The session store conformance suite: one set of checks, written once against
//! `dyn SessionService`, run against every store (memory, SQLite, PostgreSQL, Redis), so
//! the four keep the same semantics. PostgreSQL and Redis are real servers on loopback
//! (`bash .ci/start-services` starts them; `TOOLBELT_TEST_POSTGRES_URL` /
//! `TOOLBELT_TEST_REDIS_URL` point elsewhere); each test works in a schema or key prefix of
//! its own, so tests run in parallel and reruns never collide.
//!
//! The restart tests stop and start the servers of `.ci/start-services` in the middle of a
//! run of appends; the other tests on that server wait for them (a lock per server).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Map, Value, json};
use toolbelt_agent::session::is_conflict;
use toolbelt_agent::{
    AgentError, Event, EventKind, InMemorySessionService, SessionKey, SessionService,
    SqliteSessionService,
};
use toolbelt_model::Message;

/// An event whose text says who wrote it and when (`w3-17`).
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

fn texts(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .map(|e| match &e.kind {
            EventKind::UserInput { message } => message.content.clone(),
            other => other.type_name().to_string(),
        })
        .collect()
}

fn changes(value: Value) -> Map<String, Value> {
    value.as_object().cloned().unwrap()
}

/// A name no other test, run or process uses.
fn unique(tag: &str) -> String {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "{tag}_{:x}_{:x}_{}",
        std::process::id(),
        nanos,
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// One store under test, and what keeps it alive.
struct Store {
    service: Arc<dyn SessionService>,
    _dir: Option<tempfile::TempDir>,
}

async fn memory() -> Store {
    Store {
        service: Arc::new(InMemorySessionService::new()),
        _dir: None,
    }
}

async fn sqlite() -> Store {
    let dir = tempfile::tempdir().unwrap();
    let service = SqliteSessionService::open(dir.path().join("sessions.db")).unwrap();
    Store {
        service: Arc::new(service),
        _dir: Some(dir),
    }
}

#[cfg(feature = "postgres")]
fn postgres_url() -> String {
    toolbelt_testkit::service_url(
        "TOOLBELT_TEST_POSTGRES_URL",
        "postgres://toolbelt:toolbelt@127.0.0.1:5432/toolbelt",
    )
}

#[cfg(feature = "postgres")]
async fn postgres() -> Store {
    let service =
        toolbelt_agent::PostgresSessionService::open_in_schema(&postgres_url(), &unique("tb_test"))
            .await
            .unwrap();
    Store {
        service: Arc::new(service),
        _dir: None,
    }
}

#[cfg(feature = "redis")]
fn redis_url() -> String {
    toolbelt_testkit::service_url("TOOLBELT_TEST_REDIS_URL", "redis://127.0.0.1:6379")
}

#[cfg(feature = "redis")]
async fn redis_store() -> toolbelt_agent::RedisSessionService {
    toolbelt_agent::RedisSessionService::open(&redis_url())
        .await
        .unwrap()
        .with_prefix(format!("{}:", unique("toolbelt-test")))
}

#[cfg(feature = "redis")]
async fn redis() -> Store {
    Store {
        service: Arc::new(redis_store().await),
        _dir: None,
    }
}

/// Held (shared) by every test using a server, exclusively by the one restarting it.
#[cfg(any(feature = "postgres", feature = "redis"))]
mod server_lock {
    pub static POSTGRES: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());
    pub static REDIS: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());
}

// --- the checks -----------------------------------------------------------------------------

/// Events come back in the order their appends returned, a batch in its own order; sessions
/// are separate; listing and deleting work.
async fn append_and_read_in_order(store: &dyn SessionService) {
    let key = SessionKey::new("app", "alice", "s1");
    let other = SessionKey::new("app", "alice", "s2");
    let stranger = SessionKey::new("app", "bob", "s1");
    assert!(store.events(&key).await.unwrap().is_empty());
    let fresh = store.get_or_create(&key).await.unwrap();
    assert!(fresh.events.is_empty() && fresh.state.is_empty());
    assert_eq!(fresh.version, 0);

    for text in ["one", "two", "three"] {
        store.append_event(&key, &input(text)).await.unwrap();
    }
    store
        .append_events(&key, &[input("four"), input("five"), input("six")])
        .await
        .unwrap();
    store.append_events(&key, &[]).await.unwrap();
    store
        .append_event(&other, &input("elsewhere"))
        .await
        .unwrap();
    store
        .append_event(&stranger, &input("bob's"))
        .await
        .unwrap();

    let expected = ["one", "two", "three", "four", "five", "six"];
    assert_eq!(texts(&store.events(&key).await.unwrap()), expected);
    let session = store.get_or_create(&key).await.unwrap();
    assert_eq!(texts(&session.events), expected);
    assert_eq!(session.key, key);
    // Stored events are the events appended, field for field.
    let first = input("exact");
    store.append_event(&other, &first).await.unwrap();
    assert_eq!(store.events(&other).await.unwrap()[1], first);

    assert_eq!(
        store.list_sessions("app", "alice").await.unwrap(),
        ["s1", "s2"]
    );
    assert_eq!(store.list_sessions("app", "bob").await.unwrap(), ["s1"]);
    assert!(
        store
            .list_sessions("app", "carol")
            .await
            .unwrap()
            .is_empty()
    );

    assert!(store.delete_session(&key).await.unwrap());
    assert!(!store.delete_session(&key).await.unwrap());
    assert!(store.events(&key).await.unwrap().is_empty());
    assert_eq!(store.list_sessions("app", "alice").await.unwrap(), ["s2"]);
    assert_eq!(texts(&store.events(&stranger).await.unwrap()), ["bob's"]);
}

/// 32 tasks append 25 events each to one session at once: every event is kept, once, and
/// each writer's events keep their order.
async fn concurrent_appends_keep_everything(store: Arc<dyn SessionService>) {
    const WRITERS: usize = 32;
    const EACH: usize = 25;
    let key = SessionKey::new("app", "u", "busy");
    let tasks: Vec<_> = (0..WRITERS)
        .map(|w| {
            let store = store.clone();
            let key = key.clone();
            tokio::spawn(async move {
                for i in 0..EACH {
                    store
                        .append_event(&key, &input(&format!("w{w}-{i}")))
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let events = texts(&store.events(&key).await.unwrap());
    assert_eq!(events.len(), WRITERS * EACH, "every event kept");
    let mut next: HashMap<usize, usize> = HashMap::new();
    for text in &events {
        let (w, i) = text[1..].split_once('-').unwrap();
        let (w, i): (usize, usize) = (w.parse().unwrap(), i.parse().unwrap());
        let expected = next.entry(w).or_default();
        assert_eq!(
            i, *expected,
            "writer {w}'s events in order, each once: {events:?}"
        );
        *expected += 1;
    }
    assert!(next.values().all(|&n| n == EACH));
}

/// A state change based on a version someone else already changed is refused, names the
/// session, and writes nothing; read-modify-write with retries on conflict loses no update.
async fn lost_updates_are_refused(store: Arc<dyn SessionService>) {
    let key = SessionKey::new("app", "u", "counter");
    let read = store.get_or_create(&key).await.unwrap();
    let v1 = store
        .update_state_if(&key, read.version, changes(json!({"owner": "runner-a"})))
        .await
        .unwrap();
    assert_eq!(v1, read.version + 1);
    let error = store
        .update_state_if(&key, read.version, changes(json!({"owner": "runner-b"})))
        .await
        .unwrap_err();
    assert!(is_conflict(&error), "{error}");
    let message = error.to_string();
    assert!(
        message.contains("app/u/counter") && message.contains("version"),
        "{message}"
    );
    let now = store.get_or_create(&key).await.unwrap();
    assert_eq!(now.state["owner"], "runner-a", "the loser wrote nothing");
    assert_eq!(now.version, v1);

    // 16 runners increment one counter by read-modify-write: with the version check, all 16
    // increments arrive.
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let store = store.clone();
            let key = key.clone();
            tokio::spawn(async move {
                loop {
                    let session = store.get_or_create(&key).await.unwrap();
                    let n = session.state.get("n").and_then(Value::as_u64).unwrap_or(0);
                    match store
                        .update_state_if(&key, session.version, changes(json!({"n": n + 1})))
                        .await
                    {
                        Ok(_) => return,
                        Err(e) if is_conflict(&e) => tokio::task::yield_now().await,
                        Err(e) => panic!("{e}"),
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let end = store.get_or_create(&key).await.unwrap();
    assert_eq!(end.state["n"], 16, "no increment lost");
    assert_eq!(end.version, v1 + 16);
}

/// Merges, removals, one-shot values and versions.
async fn state_changes_merge_and_count(store: &dyn SessionService) {
    let key = SessionKey::new("app", "u", "state");
    store
        .update_state(
            &key,
            changes(json!({"a": 1, "b": {"deep": [1, 2, 3]}, "big": u64::MAX})),
        )
        .await
        .unwrap();
    store
        .update_state(&key, changes(json!({"a": null, "c": "x", "empty": []})))
        .await
        .unwrap();
    let session = store.get_or_create(&key).await.unwrap();
    assert_eq!(
        Value::Object(session.state.clone()),
        json!({"b": {"deep": [1, 2, 3]}, "big": u64::MAX, "c": "x", "empty": []})
    );
    assert_eq!(session.version, 2);
    assert_eq!(store.take_state(&key, "c").await.unwrap(), Some(json!("x")));
    assert_eq!(
        store.take_state(&key, "c").await.unwrap(),
        None,
        "taken once"
    );
    assert_eq!(store.take_state(&key, "missing").await.unwrap(), None);
    assert_eq!(store.get_or_create(&key).await.unwrap().version, 3);
    let nobody = SessionKey::new("app", "u", "never-created");
    assert_eq!(store.take_state(&nobody, "c").await.unwrap(), None);

    // 16 concurrent takers of one value: exactly one gets it.
    store
        .update_state(&key, changes(json!({"once": true})))
        .await
        .unwrap();
    let store: &dyn SessionService = store;
    let takes = futures::future::join_all((0..16).map(|_| store.take_state(&key, "once"))).await;
    let got = takes.into_iter().filter(|t| t.as_ref().unwrap().is_some());
    assert_eq!(got.count(), 1);
}

// --- one test per check and store -------------------------------------------------------------

macro_rules! conformance {
    ($store:ident $(, $lock:path)?) => {
        mod $store {
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn append_and_read_in_order() {
                $(let _shared = $lock.read().await;)?
                super::append_and_read_in_order(&*super::$store().await.service).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn concurrent_appends_from_32_tasks_keep_every_event_in_writer_order() {
                $(let _shared = $lock.read().await;)?
                super::concurrent_appends_keep_everything(super::$store().await.service).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn a_lost_update_is_refused_and_retries_lose_nothing() {
                $(let _shared = $lock.read().await;)?
                super::lost_updates_are_refused(super::$store().await.service).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn state_changes_merge_take_once_and_bump_the_version() {
                $(let _shared = $lock.read().await;)?
                super::state_changes_merge_and_count(&*super::$store().await.service).await;
            }
        }
    };
}

conformance!(memory);
conformance!(sqlite);
#[cfg(feature = "postgres")]
conformance!(postgres, super::server_lock::POSTGRES);
#[cfg(feature = "redis")]
conformance!(redis, super::server_lock::REDIS);

#[tokio::test]
async fn a_sqlite_file_from_before_state_versions_opens_at_version_0() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE sessions (app TEXT NOT NULL, user_id TEXT NOT NULL,
                 session_id TEXT NOT NULL, state TEXT NOT NULL DEFAULT '{}',
                 created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL,
                 PRIMARY KEY (app, user_id, session_id));
             INSERT INTO sessions VALUES ('app', 'u', 's', '{\"k\":1}', 0, 0);",
        )
        .unwrap();
    }
    let store = SqliteSessionService::open(&path).unwrap();
    let key = SessionKey::new("app", "u", "s");
    let session = store.get_or_create(&key).await.unwrap();
    assert_eq!((session.state["k"].clone(), session.version), (json!(1), 0));
    assert_eq!(
        store
            .update_state_if(&key, 0, changes(json!({"k": 2})))
            .await
            .unwrap(),
        1
    );
}

#[tokio::test]
async fn a_new_sqlite_file_and_its_wal_are_readable_by_the_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    // Under the usual umask (022) SQLite alone would make it 0644.
    let store = SqliteSessionService::open(&path).unwrap();
    let key = SessionKey::new("app", "u", "secret");
    store.get_or_create(&key).await.unwrap();
    store
        .append_event(&key, &input("the whole tool output"))
        .await
        .unwrap();
    let mut checked = 0;
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let entry = entry.unwrap();
        let mode = entry.metadata().unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{} is {mode:o}", entry.path().display());
        checked += 1;
    }
    assert!(checked >= 1);
}

#[tokio::test]
async fn a_url_whose_store_is_not_compiled_in_or_a_bad_one_is_a_clear_error() {
    // Every feature is on in CI, so the missing-feature message is checked by the unit test
    // of `open_url`'s dispatch; here: a URL that cannot work fails without leaking it.
    #[cfg(feature = "postgres")]
    {
        let Err(error) =
            toolbelt_agent::session::open_url("postgres://u:secret@127.0.0.1:1/db").await
        else {
            panic!("nothing listens on port 1")
        };
        assert!(!error.to_string().contains("secret"), "{error}");
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let store = toolbelt_agent::session::open_url(path.to_str().unwrap())
        .await
        .unwrap();
    store
        .append_event(&SessionKey::new("a", "u", "s"), &input("x"))
        .await
        .unwrap();
    assert!(path.exists(), "a path is a SQLite file");
}

// --- TTL (Redis only: the other stores keep sessions until deleted) ---------------------------

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_sessions_expire_whole_after_their_ttl_and_writes_extend_it() {
    let _shared = server_lock::REDIS.read().await;
    let url = redis_url();
    let prefix = format!("{}:", unique("toolbelt-test"));
    let store = toolbelt_agent::RedisSessionService::open(&url)
        .await
        .unwrap()
        .with_prefix(prefix.clone())
        .with_ttl(Duration::from_secs(1));
    let key = SessionKey::new("app", "u", "brief");
    store.append_event(&key, &input("hello")).await.unwrap();
    store
        .update_state(&key, changes(json!({"k": 1})))
        .await
        .unwrap();

    // Every key of the session carries the TTL.
    let client = ::redis::Client::open(url.as_str()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> = ::redis::cmd("KEYS")
        .arg(format!("{prefix}*"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(keys.len(), 4, "meta, state, events, index: {keys:?}");
    for k in &keys {
        let ttl: i64 = ::redis::cmd("PTTL")
            .arg(k)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(ttl > 0 && ttl <= 1000, "{k}: {ttl}");
    }

    // Gone as a whole once idle past the TTL (polled, with a generous upper bound).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let left: Vec<String> = ::redis::cmd("KEYS")
            .arg(format!("{prefix}*"))
            .query_async(&mut conn)
            .await
            .unwrap();
        if left.is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still there: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(store.events(&key).await.unwrap().is_empty());
    assert!(store.list_sessions("app", "u").await.unwrap().is_empty());
    let again = store.get_or_create(&key).await.unwrap();
    assert_eq!((again.version, again.state.len()), (0, 0), "a new session");
}

// --- a server restarted in the middle of a run ---------------------------------------------

#[cfg(any(feature = "postgres", feature = "redis"))]
fn start_services(args: &[&str]) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../.ci/start-services");
    let status = std::process::Command::new("bash")
        .arg(script)
        .args(args)
        .status()
        .expect("bash .ci/start-services");
    assert!(status.success(), "bash .ci/start-services {args:?} failed");
}

/// A writer appends numbered batches of 3 events while the server is stopped and started
/// again. While it is down, an append fails with an error naming the store; afterwards the
/// same store object works again; every batch whose append returned Ok is stored, and every
/// batch is stored whole or not at all (an append that failed may or may not have committed
/// before the connection was cut, never in part).
#[cfg(any(feature = "postgres", feature = "redis"))]
async fn survives_a_restart(store: Arc<dyn SessionService>, server: &str, name_in_error: &str) {
    use std::sync::atomic::AtomicBool;
    const BATCH: usize = 3;
    let key = SessionKey::new("app", "u", "restarted");
    let stop = Arc::new(AtomicBool::new(false));
    let ok_batches = Arc::new(AtomicUsize::new(0));
    let writer = {
        let (store, key, stop, ok_batches) =
            (store.clone(), key.clone(), stop.clone(), ok_batches.clone());
        tokio::spawn(async move {
            let mut results = Vec::new();
            let mut batch = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let events: Vec<Event> = (0..BATCH)
                    .map(|i| input(&format!("b{batch}-{i}")))
                    .collect();
                let result = store.append_events(&key, &events).await;
                if result.is_ok() {
                    ok_batches.fetch_add(1, Ordering::Relaxed);
                } else {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                results.push(result.map_err(|e| e.to_string()));
                batch += 1;
            }
            results
        })
    };
    let wait_for_batches = |at_least: usize| {
        let ok_batches = ok_batches.clone();
        async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
            while ok_batches.load(Ordering::Relaxed) < at_least {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the writer stopped making progress"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    wait_for_batches(5).await;

    tokio::task::spawn_blocking({
        let server = server.to_string();
        move || start_services(&["stop", &server])
    })
    .await
    .unwrap();
    let down = store
        .append_event(&key, &input("while down"))
        .await
        .unwrap_err();
    assert!(
        matches!(down, AgentError::Session(_)) && down.to_string().contains(name_in_error),
        "a clear session store error: {down}"
    );
    tokio::task::spawn_blocking({
        let server = server.to_string();
        move || start_services(&["start", &server])
    })
    .await
    .unwrap();

    let before = ok_batches.load(Ordering::Relaxed);
    wait_for_batches(before + 5).await;
    stop.store(true, Ordering::Relaxed);
    let results = writer.await.unwrap();
    assert!(
        results.iter().any(Result::is_err),
        "the writer saw the outage"
    );

    let stored = texts(&store.events(&key).await.unwrap());
    assert!(!stored.iter().any(|t| t == "while down"));
    let mut by_batch: HashMap<usize, Vec<usize>> = HashMap::new();
    for text in &stored {
        let (b, i) = text[1..].split_once('-').unwrap();
        by_batch
            .entry(b.parse().unwrap())
            .or_default()
            .push(i.parse().unwrap());
    }
    for (batch, parts) in &by_batch {
        assert_eq!(
            parts,
            &[0, 1, 2],
            "batch {batch} stored whole, once, in order"
        );
    }
    for (batch, result) in results.iter().enumerate() {
        if result.is_ok() {
            assert!(
                by_batch.contains_key(&batch),
                "batch {batch} returned Ok but is lost"
            );
        }
    }
    let mut order: Vec<usize> = Vec::new();
    for text in stored.iter().step_by(BATCH) {
        order.push(text[1..].split_once('-').unwrap().0.parse().unwrap());
    }
    assert!(
        order.windows(2).all(|w| w[0] < w[1]),
        "batches in order: {order:?}"
    );
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restarted_mid_run_gives_a_clear_error_no_partial_batch_then_works() {
    let _exclusive = server_lock::POSTGRES.write().await;
    let store = postgres().await.service;
    survives_a_restart(store, "postgres", "postgres").await;
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_restarted_mid_run_gives_a_clear_error_no_partial_batch_then_works() {
    let _exclusive = server_lock::REDIS.write().await;
    let store = redis().await.service;
    survives_a_restart(store, "redis", "redis").await;
}
