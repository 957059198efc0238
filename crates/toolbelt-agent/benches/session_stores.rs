//! Session stores side by side: events persisted per second and the p99 latency of one
//! append, for SQLite, PostgreSQL and Redis with 1, 16 and 256 sessions written at once (one
//! task per session, each appending one event after another for a fixed time).
//!
//! Needs the servers of `bash .ci/start-services` (or `TOOLBELT_TEST_POSTGRES_URL`,
//! `TOOLBELT_TEST_REDIS_URL`). Run:
//! `CARGO_TARGET_DIR=/work/target/bench cargo bench -p toolbelt-agent --features sqlite,postgres,redis --bench session_stores`
//! (`SESSION_BENCH_SECS` sets the time per cell, default 5).

use std::sync::Arc;
use std::time::{Duration, Instant};

use toolbelt_agent::{
    Event, EventKind, PostgresSessionService, RedisSessionService, SessionKey, SessionService,
    SqliteSessionService,
};
use toolbelt_model::Message;

fn event(session: usize, i: usize) -> Event {
    Event::new(
        "bench",
        None,
        "user",
        EventKind::UserInput {
            message: Message::user(format!(
                "session {session}, event {i}: a user message of typical length, about one \
                 line of text, as a turn of a chat stores it"
            )),
        },
    )
}

struct Cell {
    events: usize,
    elapsed: Duration,
    p99: Duration,
    errors: usize,
}

async fn run(store: Arc<dyn SessionService>, sessions: usize, time: Duration) -> Cell {
    let run_id = std::process::id();
    let started = Instant::now();
    let deadline = started + time;
    let tasks: Vec<_> = (0..sessions)
        .map(|s| {
            let store = store.clone();
            tokio::spawn(async move {
                let key = SessionKey::new("bench", "u", format!("{run_id}-{sessions}-{s}"));
                let mut latencies = Vec::new();
                let mut errors = 0;
                let mut i = 0;
                while Instant::now() < deadline {
                    let t = Instant::now();
                    match store.append_event(&key, &event(s, i)).await {
                        Ok(()) => latencies.push(t.elapsed()),
                        Err(_) => errors += 1,
                    }
                    i += 1;
                }
                (latencies, errors)
            })
        })
        .collect();
    let mut latencies = Vec::new();
    let mut errors = 0;
    for task in tasks {
        let (l, e) = task.await.unwrap();
        latencies.extend(l);
        errors += e;
    }
    let elapsed = started.elapsed();
    latencies.sort();
    let p99 = latencies
        .get((latencies.len() * 99 / 100).min(latencies.len().saturating_sub(1)))
        .copied()
        .unwrap_or_default();
    Cell {
        events: latencies.len(),
        elapsed,
        p99,
        errors,
    }
}

fn main() {
    let secs: u64 = std::env::var("SESSION_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let time = Duration::from_secs(secs);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pg_url = toolbelt_testkit::service_url(
        "TOOLBELT_TEST_POSTGRES_URL",
        "postgres://toolbelt:toolbelt@127.0.0.1:5432/toolbelt",
    );
    let redis_url =
        toolbelt_testkit::service_url("TOOLBELT_TEST_REDIS_URL", "redis://127.0.0.1:6379");
    let tag = format!("bench_{}", std::process::id());
    println!("| store | sessions at once | events/s | p99 append | errors |");
    println!("|---|---:|---:|---:|---:|");
    runtime.block_on(async {
        let stores: Vec<(&str, Arc<dyn SessionService>)> = vec![
            (
                "SQLite (WAL, synchronous=FULL)",
                Arc::new(SqliteSessionService::open(dir.path().join("bench.db")).unwrap()),
            ),
            (
                "PostgreSQL (pool of 16)",
                Arc::new(
                    PostgresSessionService::open_in_schema(&pg_url, &tag)
                        .await
                        .unwrap(),
                ),
            ),
            (
                "Redis (appendonly, fsync every second)",
                Arc::new(
                    RedisSessionService::open(&redis_url)
                        .await
                        .unwrap()
                        .with_prefix(format!("{tag}:")),
                ),
            ),
        ];
        for (name, store) in &stores {
            for sessions in [1, 16, 256] {
                let cell = run(store.clone(), sessions, time).await;
                println!(
                    "| {name} | {sessions} | {:.0} | {:.2} ms | {} |",
                    cell.events as f64 / cell.elapsed.as_secs_f64(),
                    cell.p99.as_secs_f64() * 1000.0,
                    cell.errors
                );
            }
        }
    });
}
