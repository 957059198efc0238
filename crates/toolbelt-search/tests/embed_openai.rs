//! The OpenAI-compatible `/embeddings` client against a real HTTP server on 127.0.0.1 (the
//! scripted model server): batching, what is sent, and a clear error for every broken answer.

use std::time::Duration;

use serde_json::json;
use toolbelt_model::testing::{Reply, ScriptedServer, hashed_embedding};
use toolbelt_search::SearchError;
use toolbelt_search::embed::{Embedder, OpenAiEmbedder};

fn texts(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("text number {i} about files"))
        .collect()
}

async fn error_of(server: &ScriptedServer, reply: Reply, embedder: &OpenAiEmbedder) -> String {
    server.push_embeddings([reply]);
    match embedder.embed(&texts(2)).await {
        Err(SearchError::Embedder(message)) => message,
        other => panic!("expected an embedder error, got {other:?}"),
    }
}

fn raw_json(body: serde_json::Value) -> Reply {
    Reply::raw("application/json", body.to_string())
}

#[tokio::test]
async fn embeds_in_batches_in_input_order_with_model_and_key() {
    let server = ScriptedServer::start([]).await.unwrap();
    let embedder = OpenAiEmbedder::new(server.base_url(), "embed-small")
        .api_key("sk-test")
        .batch_size(3);
    let input = texts(7);
    let vectors = embedder.embed(&input).await.unwrap();

    let expected: Vec<Vec<f32>> = input.iter().map(|t| hashed_embedding(t, 64)).collect();
    assert_eq!(vectors, expected);
    let requests = server.embedding_requests();
    let sizes: Vec<usize> = requests
        .iter()
        .map(|r| r.body["input"].as_array().unwrap().len())
        .collect();
    assert_eq!(sizes, [3, 3, 1]);
    assert_eq!(requests[0].body["model"], "embed-small");
    assert_eq!(requests[0].body["encoding_format"], "float");
    assert_eq!(requests[0].headers["authorization"], "Bearer sk-test");
    // No texts, no request.
    assert!(embedder.embed(&[]).await.unwrap().is_empty());
    assert_eq!(server.embedding_requests().len(), 3);
}

#[tokio::test]
async fn dimensions_are_requested_checked_and_part_of_the_model_id() {
    let server = ScriptedServer::start([]).await.unwrap();
    let plain = OpenAiEmbedder::new(server.base_url(), "m");
    let short = OpenAiEmbedder::new(format!("{}/", server.base_url()), "m").dimensions(16);
    assert_ne!(plain.model_id(), short.model_id());
    let vectors = short.embed(&texts(2)).await.unwrap();
    assert_eq!(vectors[0].len(), 16);
    assert_eq!(server.embedding_requests()[0].body["dimensions"], 16);

    // A server that ignores `dimensions` is caught.
    let wrong = raw_json(json!({"data": [
        {"index": 0, "embedding": [1.0, 2.0]}, {"index": 1, "embedding": [1.0, 2.0]}]}));
    let message = error_of(&server, wrong, &short).await;
    assert!(
        message.contains("2 dimensions") && message.contains("16"),
        "{message}"
    );
}

#[tokio::test]
async fn answers_out_of_order_are_put_back_by_index() {
    let server = ScriptedServer::start([]).await.unwrap();
    let embedder = OpenAiEmbedder::new(server.base_url(), "m");
    server.push_embeddings([raw_json(json!({"data": [
        {"index": 1, "embedding": [0.0, 1.0]}, {"index": 0, "embedding": [1.0, 0.0]}]}))]);
    let vectors = embedder.embed(&texts(2)).await.unwrap();
    assert_eq!(vectors, [vec![1.0, 0.0], vec![0.0, 1.0]]);
}

#[tokio::test]
async fn error_statuses_quote_the_servers_message() {
    let server = ScriptedServer::start([]).await.unwrap();
    let embedder = OpenAiEmbedder::new(server.base_url(), "m");

    let message = error_of(
        &server,
        Reply::status(401, "Incorrect API key provided"),
        &embedder,
    )
    .await;
    assert!(message.contains("401"), "{message}");
    assert!(message.contains("Incorrect API key provided"), "{message}");
    assert!(message.contains("/embeddings"), "names the URL: {message}");

    let html = Reply::Raw {
        status: 502,
        content_type: Some("text/html".into()),
        body: "<html>Bad Gateway</html>".into(),
    };
    let message = error_of(&server, html, &embedder).await;
    assert!(
        message.contains("502") && message.contains("Bad Gateway"),
        "{message}"
    );

    let long = Reply::Raw {
        status: 500,
        content_type: None,
        body: "x".repeat(100_000),
    };
    let message = error_of(&server, long, &embedder).await;
    assert!(
        message.len() < 1_000,
        "a huge body is shortened: {} bytes",
        message.len()
    );

    let message = error_of(
        &server,
        Reply::raw("application/json", "{not json"),
        &embedder,
    )
    .await;
    assert!(message.contains("not JSON"), "{message}");
}

#[tokio::test]
async fn wrong_shapes_are_clear_errors() {
    let server = ScriptedServer::start([]).await.unwrap();
    let embedder = OpenAiEmbedder::new(server.base_url(), "m");
    let cases = [
        (json!({"object": "list"}), "no \"data\""),
        (
            json!({"data": [{"index": 0, "embedding": [1.0]}]}),
            "1 embeddings for 2 texts",
        ),
        (
            json!({"data": [{"index": 0, "embedding": [1.0, 2.0]}, {"index": 1, "embedding": [1.0]}]}),
            "1 dimensions",
        ),
        (
            json!({"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [1.0]}]}),
            "two embeddings have index 0",
        ),
        (
            json!({"data": [{"index": 0, "embedding": [1.0]}, {"index": 7, "embedding": [1.0]}]}),
            "out of range",
        ),
        (
            json!({"data": [{"index": 0, "embedding": "AACAPw=="}, {"index": 1, "embedding": "AACAPw=="}]}),
            "base64",
        ),
        (
            json!({"data": [{"index": 0, "embedding": [1.0, "x"]}, {"index": 1, "embedding": [1.0, 2.0]}]}),
            "other than numbers",
        ),
        // Finite in JSON (f64), infinite as f32.
        (
            json!({"data": [{"index": 0, "embedding": [1.0, 1e300]}, {"index": 1, "embedding": [1.0, 2.0]}]}),
            "non-finite",
        ),
        (
            json!({"data": [{"index": 0, "embedding": [0.0, 0.0]}, {"index": 1, "embedding": [1.0, 2.0]}]}),
            "all-zero",
        ),
    ];
    for (body, expected) in cases {
        let message = error_of(&server, raw_json(body.clone()), &embedder).await;
        assert!(message.contains(expected), "{body}: {message}");
    }
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    let server = ScriptedServer::start([]).await.unwrap();
    let embedder = OpenAiEmbedder::new(server.base_url(), "m").timeout(Duration::from_millis(300));
    let message = error_of(&server, Reply::NoAnswer, &embedder).await;
    assert!(message.contains("timed out"), "{message}");
}

#[tokio::test]
async fn an_unreachable_server_is_a_connect_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let embedder = OpenAiEmbedder::new(format!("http://{addr}/v1"), "m");
    match embedder.embed(&texts(1)).await {
        Err(SearchError::Embedder(message)) => {
            assert!(message.contains("cannot connect"), "{message}")
        }
        other => panic!("expected a connect error, got {other:?}"),
    }
}

#[test]
fn debug_output_never_shows_the_key() {
    let embedder = OpenAiEmbedder::new("http://127.0.0.1:1/v1", "m").api_key("sk-secret-123");
    assert!(!format!("{embedder:?}").contains("sk-secret"));
}
