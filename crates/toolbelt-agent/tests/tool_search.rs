//! Tool search in the agent loop, against the scripted model server: LLM selection,
//! index (BM25) selection, fail open / fail closed, usage, deferred tools and `tool_search`,
//! and the incremental index update when a tool set's listing changes.

use crate::agent_support;

use std::sync::{Arc, Mutex};

use agent_support::*;
use async_trait::async_trait;
use toolbelt_agent::tool_search::{IndexStats, TOOL_SEARCH, ToolSearch, ToolSearchUsage};
use toolbelt_agent::{Callbacks, ErrorKind, EventKind, Invocation, RunOptions, Runner};
use toolbelt_core::{DynTool, FunctionTool, ToolContext, ToolError, ToolFilter, ToolSet};
use toolbelt_model::testing::{Reply, ScriptedServer};
use toolbelt_model::{Message, Request};
use toolbelt_search::Method;

/// A catalogue of tools with distinct jobs.
const CATALOG: &[(&str, &str)] = &[
    (
        "get_weather",
        "Gets the current weather forecast for a city",
    ),
    ("send_email", "Sends an email message to a recipient"),
    (
        "create_calendar_event",
        "Creates an event in the user's calendar",
    ),
    ("search_web", "Searches the web for pages matching a query"),
    (
        "convert_currency",
        "Converts an amount of money between currencies",
    ),
    ("translate_text", "Translates text into another language"),
    ("book_flight", "Books a flight between two airports"),
    ("play_music", "Plays a song or playlist on the speaker"),
    ("set_timer", "Starts a countdown timer"),
    ("read_news", "Reads today's news headlines"),
    ("order_pizza", "Orders a pizza for delivery"),
    (
        "github_create_issue",
        "Creates an issue in a GitHub repository",
    ),
];

fn names(list: &[(&str, &str)]) -> Vec<String> {
    list.iter().map(|(n, _)| n.to_string()).collect()
}

fn tool(name: &str, description: &str) -> DynTool {
    let answer = format!("{name} done");
    Arc::new(
        FunctionTool::new(name, description, move |_ctx: ToolContext, _args: Args| {
            let answer = answer.clone();
            async move { Ok::<_, ToolError>(answer) }
        })
        .unwrap(),
    )
}

fn catalog() -> Vec<DynTool> {
    CATALOG.iter().map(|(n, d)| tool(n, d)).collect()
}

/// A runner whose agent has the whole catalogue, with `search` as a plugin.
fn runner_with_plugin(main: &ScriptedServer, search: &ToolSearch) -> Runner {
    let agent = agent("assistant", main, false)
        .tools(catalog())
        .build()
        .unwrap();
    Runner::new("app", Arc::new(agent)).with_plugin(search.plugin())
}

/// The names of the tools each request to `server` offered.
fn offered(server: &ScriptedServer) -> Vec<Vec<String>> {
    server.requests().iter().map(|r| r.tool_names()).collect()
}

/// The search server's prompt (its user message).
fn search_prompt(server: &ScriptedServer, index: usize) -> String {
    let requests = server.requests();
    let messages = requests[index].messages();
    messages.last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Callbacks recording the run's tool search usage at every model call.
fn usage_probe(seen: &Arc<Mutex<Vec<Option<ToolSearchUsage>>>>) -> Callbacks {
    let seen = seen.clone();
    Callbacks::new().after_model(move |inv: &Invocation, _: &mut Message| {
        seen.lock()
            .unwrap()
            .push(ToolSearchUsage::from_invocation(inv));
        Ok(())
    })
}

#[tokio::test]
async fn the_llm_search_keeps_only_the_tools_the_search_model_names() {
    let search_server = ScriptedServer::start([Reply::text(
        r#"["send_email", "get_weather", "no_such_tool"]"#,
    )])
    .await
    .unwrap();
    let main = ScriptedServer::start([Reply::text("done")]).await.unwrap();
    let search = ToolSearch::builder()
        .llm(model(&search_server))
        .max_tools(3)
        .build()
        .unwrap();
    let runner = runner_with_plugin(&main, &search);
    let events = run(
        &runner,
        "s",
        "Email Ada the weather in Paris",
        RunOptions::new(),
    )
    .await;
    no_errors(&events);

    // The main model saw the two named tools (a name the search invented is ignored), in
    // the order the agent lists its tools.
    assert_eq!(offered(&main), vec![vec!["get_weather", "send_email"]]);
    // The search model saw every candidate and the question.
    let prompt = search_prompt(&search_server, 0);
    for (name, description) in CATALOG {
        assert!(
            prompt.contains(&format!("- {name}: {description}")),
            "{prompt}"
        );
    }
    assert!(
        prompt.contains("Email Ada the weather in Paris"),
        "{prompt}"
    );
}

#[tokio::test]
async fn as_an_agent_callback_the_search_sees_only_what_the_tool_filter_lets_through() {
    let search_server = ScriptedServer::start([Reply::text(r#"["send_email"]"#)])
        .await
        .unwrap();
    let main = ScriptedServer::start([Reply::text("done")]).await.unwrap();
    let search = ToolSearch::builder()
        .llm(model(&search_server))
        .max_tools(2)
        .build()
        .unwrap();
    let agent = agent("assistant", &main, false)
        .tools(catalog())
        .tool_filter(ToolFilter::exclude_names(["get_weather", "book_flight"]))
        .callbacks(search.callbacks())
        .build()
        .unwrap();
    let runner = Runner::new("app", Arc::new(agent));
    let events = run(&runner, "s", "Email Ada", RunOptions::new()).await;
    no_errors(&events);

    assert_eq!(offered(&main), vec![vec!["send_email"]]);
    let prompt = search_prompt(&search_server, 0);
    assert!(
        !prompt.contains("get_weather") && !prompt.contains("book_flight"),
        "{prompt}"
    );
    assert!(prompt.contains("- order_pizza:"), "{prompt}");
}

#[tokio::test]
async fn the_usage_of_the_search_is_readable_from_the_invocation_and_one_search_serves_a_whole_answer()
 {
    let search_server = ScriptedServer::start([Reply::text(r#"["get_weather"]"#)])
        .await
        .unwrap();
    let main = ScriptedServer::start([
        Reply::tool_call("c1", "get_weather", r#"{"city":"Paris"}"#),
        Reply::text("sunny"),
    ])
    .await
    .unwrap();
    let search = ToolSearch::builder()
        .llm(model(&search_server))
        .max_tools(1)
        .build()
        .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let agent = agent("assistant", &main, false)
        .tools(catalog())
        .callbacks(usage_probe(&seen))
        .build()
        .unwrap();
    let runner = Runner::new("app", Arc::new(agent)).with_plugin(search.plugin());
    let events = run(&runner, "s", "Weather in Paris?", RunOptions::new()).await;
    no_errors(&events);
    assert_eq!(final_answer(&events), "sunny");

    // Both model calls of the answer got the selection, from one search call.
    assert_eq!(
        offered(&main),
        vec![vec!["get_weather"], vec!["get_weather"]]
    );
    assert_eq!(search_server.requests().len(), 1);
    // The scripted server reports 11 + 7 = 18 tokens per call.
    let expected = ToolSearchUsage {
        calls: 1,
        prompt_tokens: 11,
        completion_tokens: 7,
        total_tokens: 18,
    };
    assert_eq!(*seen.lock().unwrap(), vec![Some(expected), Some(expected)]);
}

#[tokio::test]
async fn with_fail_open_a_failed_search_offers_every_tool_and_warns() {
    let search_server = ScriptedServer::start([Reply::status(400, "model overloaded")])
        .await
        .unwrap();
    let main = ScriptedServer::start([Reply::text("done")]).await.unwrap();
    let search = ToolSearch::builder()
        .llm(model(&search_server))
        .max_tools(2)
        .fail_open(true)
        .build()
        .unwrap();
    let runner = runner_with_plugin(&main, &search);
    let events = run(&runner, "s", "Email Ada", RunOptions::new()).await;
    no_errors(&events);
    assert_eq!(final_answer(&events), "done");

    let mut every = names(CATALOG);
    every.sort();
    assert_eq!(offered(&main), vec![every]);
    let warnings: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Warning { message } => Some(message.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("tool search failed"),
        "{}",
        warnings[0]
    );
    assert!(warnings[0].contains("model overloaded"), "{}", warnings[0]);
}

#[tokio::test]
async fn without_fail_open_a_failed_search_ends_the_run_with_the_reason() {
    for (reply, reason) in [
        (Reply::status(400, "model overloaded"), "model overloaded"),
        (
            Reply::text("I would use the weather tool"),
            "not a JSON list",
        ),
    ] {
        let search_server = ScriptedServer::start([reply]).await.unwrap();
        let main = ScriptedServer::start([Reply::text("done")]).await.unwrap();
        let search = ToolSearch::builder()
            .llm(model(&search_server))
            .max_tools(2)
            .build()
            .unwrap();
        let runner = runner_with_plugin(&main, &search);
        let events = run(&runner, "s", "Email Ada", RunOptions::new()).await;

        let errors = errors(&events);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].0, ErrorKind::Callback);
        assert!(
            errors[0].1.contains("tool search failed"),
            "{}",
            errors[0].1
        );
        assert!(errors[0].1.contains(reason), "{}", errors[0].1);
        assert!(main.requests().is_empty(), "the main model was called");
        assert!(matches!(
            events.last().unwrap().kind,
            EventKind::RunCompleted
        ));
    }
}

#[tokio::test]
async fn bm25_keeps_the_best_matching_tools_without_any_search_model() {
    let main = ScriptedServer::start([Reply::text("done")]).await.unwrap();
    let search = ToolSearch::builder()
        .index(Method::Bm25)
        .max_tools(2)
        .build()
        .unwrap();
    let runner = runner_with_plugin(&main, &search);
    let events = run(
        &runner,
        "s",
        "convert 20 euros into another currency",
        RunOptions::new(),
    )
    .await;
    no_errors(&events);

    let offered = offered(&main);
    assert_eq!(offered[0].len(), 2, "{offered:?}");
    assert!(
        offered[0].contains(&"convert_currency".to_string()),
        "{offered:?}"
    );
}

/// A search deferring the GitHub and pizza tools, ranking them with BM25.
fn deferring() -> ToolSearch {
    ToolSearch::builder()
        .defer_names(["github_create_issue", "order_pizza"])
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_deferred_tool_is_loaded_by_tool_search_for_the_rest_of_the_run_only() {
    let main = ScriptedServer::start([
        Reply::tool_call("c1", TOOL_SEARCH, r#"{"query":"open an issue on GitHub"}"#),
        Reply::tool_call("c2", "github_create_issue", r#"{"title":"bug"}"#),
        Reply::text("filed"),
        Reply::text("second run"),
    ])
    .await
    .unwrap();
    let search = deferring();
    let runner = runner_with_plugin(&main, &search);
    let events = run(&runner, "s", "File a bug", RunOptions::new()).await;
    no_errors(&events);
    assert_eq!(final_answer(&events), "filed");

    let offered = offered(&main);
    let all_but_deferred: Vec<String> = names(CATALOG)
        .into_iter()
        .filter(|n| n != "github_create_issue" && n != "order_pizza")
        .chain([TOOL_SEARCH.to_string()])
        .collect();
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    // First request: no deferred tool, but tool_search.
    assert_eq!(sorted(offered[0].clone()), sorted(all_but_deferred.clone()));
    // tool_search found the GitHub tool (not the pizza) and said so.
    let found = &results(&events)[0];
    assert_eq!(found.name, TOOL_SEARCH);
    assert!(
        found
            .content
            .contains("- github_create_issue: Creates an issue in a GitHub repository"),
        "{}",
        found.content
    );
    assert!(!found.content.contains("order_pizza"), "{}", found.content);
    // The next requests of the run carry it; the tool ran.
    let mut with_github = all_but_deferred.clone();
    with_github.push("github_create_issue".into());
    assert_eq!(sorted(offered[1].clone()), sorted(with_github.clone()));
    assert_eq!(sorted(offered[2].clone()), sorted(with_github));
    assert_eq!(results(&events)[1].content, "github_create_issue done");

    // A new run in the same session starts with nothing loaded.
    let events = run(&runner, "s", "Anything else?", RunOptions::new()).await;
    no_errors(&events);
    assert_eq!(
        sorted(self::offered(&main)[3].clone()),
        sorted(all_but_deferred)
    );
}

#[tokio::test]
async fn a_deferred_tool_called_before_it_was_loaded_runs_and_is_loaded_afterwards() {
    let main = ScriptedServer::start([
        Reply::tool_call("c1", "order_pizza", r#"{}"#),
        Reply::text("ordered"),
    ])
    .await
    .unwrap();
    let runner = runner_with_plugin(&main, &deferring());
    let events = run(&runner, "s", "Pizza please", RunOptions::new()).await;
    no_errors(&events);

    assert_eq!(results(&events)[0].content, "order_pizza done");
    let offered = offered(&main);
    assert!(
        !offered[0].contains(&"order_pizza".to_string()),
        "{offered:?}"
    );
    assert!(
        offered[1].contains(&"order_pizza".to_string()),
        "{offered:?}"
    );
    assert!(
        !offered[1].contains(&"github_create_issue".to_string()),
        "{offered:?}"
    );
}

#[tokio::test]
async fn tool_search_says_so_when_nothing_matches_and_loads_nothing() {
    let main = ScriptedServer::start([
        Reply::tool_call("c1", TOOL_SEARCH, r#"{"query":"quantum chromodynamics"}"#),
        Reply::text("nothing"),
    ])
    .await
    .unwrap();
    let runner = runner_with_plugin(&main, &deferring());
    let events = run(&runner, "s", "Physics?", RunOptions::new()).await;
    no_errors(&events);
    assert!(
        results(&events)[0].content.starts_with("No tool matches"),
        "{}",
        results(&events)[0].content
    );
    let offered = offered(&main);
    assert_eq!(offered[0], offered[1]);
}

/// A tool set whose listing the test changes between runs.
struct ChangingSet {
    tools: Mutex<Vec<DynTool>>,
}

#[async_trait]
impl ToolSet for ChangingSet {
    fn name(&self) -> &str {
        "changing"
    }

    async fn tools(&self, _ctx: &ToolContext) -> Result<Vec<DynTool>, ToolError> {
        Ok(self.tools.lock().unwrap().clone())
    }
}

#[tokio::test]
async fn the_index_is_updated_incrementally_when_a_tool_sets_listing_changes() {
    let main =
        ScriptedServer::start([Reply::text("one"), Reply::text("two"), Reply::text("three")])
            .await
            .unwrap();
    let set = Arc::new(ChangingSet {
        tools: Mutex::new(catalog()),
    });
    let search = ToolSearch::builder()
        .index(Method::Bm25)
        .max_tools(3)
        .build()
        .unwrap();
    let agent = agent("assistant", &main, false)
        .tool_set(set.clone())
        .refresh_tool_sets_on_run(true)
        .build()
        .unwrap();
    let runner = Runner::new("app", Arc::new(agent)).with_plugin(search.plugin());

    no_errors(&run(&runner, "s", "weather in Paris", RunOptions::new()).await);
    let first = search.index_stats();
    assert_eq!(
        first,
        IndexStats {
            syncs: 1,
            added: CATALOG.len(),
            ..IndexStats::default()
        }
    );

    // One tool's description changes, one disappears, one appears (as after list_changed).
    {
        let mut tools = set.tools.lock().unwrap();
        tools.retain(|t| t.name() != "order_pizza" && t.name() != "get_weather");
        tools.push(tool(
            "get_weather",
            "Gets the weather forecast and the pollen count for a city",
        ));
        tools.push(tool("order_sushi", "Orders sushi for delivery"));
    }
    let events = run(&runner, "s", "order sushi for dinner", RunOptions::new()).await;
    no_errors(&events);
    let second = search.index_stats();
    assert_eq!(
        second,
        IndexStats {
            syncs: 2,
            added: CATALOG.len() + 1,
            changed: 1,
            removed: 1,
            ..IndexStats::default()
        }
    );
    assert!(
        offered(&main)[1].contains(&"order_sushi".to_string()),
        "{:?}",
        offered(&main)
    );

    // Nothing changed: nothing is re-indexed.
    no_errors(&run(&runner, "s", "weather", RunOptions::new()).await);
    let third = search.index_stats();
    assert_eq!(
        (third.added, third.changed, third.removed),
        (second.added, second.changed, second.removed)
    );
    assert_eq!(third.syncs, 3);
}

#[test]
fn a_search_with_nothing_chosen_or_embeddings_without_an_embedder_is_a_configuration_error() {
    assert!(ToolSearch::builder().build().is_err());
    let error = ToolSearch::builder()
        .index(Method::Hybrid)
        .build()
        .unwrap_err();
    assert!(error.to_string().contains("needs embeddings"), "{error}");
}

#[tokio::test]
async fn the_search_rewrites_the_request_not_the_agent() {
    // A before_model callback after the search sees the narrowed list.
    let search_server = ScriptedServer::start([Reply::text(r#"["set_timer"]"#)])
        .await
        .unwrap();
    let main = ScriptedServer::start([Reply::text("done")]).await.unwrap();
    let search = ToolSearch::builder()
        .llm(model(&search_server))
        .max_tools(1)
        .build()
        .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let probe = seen.clone();
    let agent = agent("assistant", &main, false)
        .tools(catalog())
        .callbacks(
            Callbacks::new().before_model(move |_: &Invocation, request: &mut Request| {
                probe.lock().unwrap().push(
                    request
                        .tools
                        .iter()
                        .map(|d| d.name.to_string())
                        .collect::<Vec<_>>(),
                );
                Ok(None)
            }),
        )
        .build()
        .unwrap();
    let runner = Runner::new("app", Arc::new(agent)).with_plugin(search.plugin());
    no_errors(&run(&runner, "s", "Start a timer", RunOptions::new()).await);
    assert_eq!(*seen.lock().unwrap(), vec![vec!["set_timer".to_string()]]);
}

/// A small real embedder: each word of the text counted into one of 64 dimensions.
struct WordHashEmbedder;

#[async_trait]
impl toolbelt_search::embed::Embedder for WordHashEmbedder {
    fn model_id(&self) -> &str {
        "word-hash-64"
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, toolbelt_search::SearchError> {
        use std::hash::{DefaultHasher, Hash, Hasher};
        Ok(texts
            .iter()
            .map(|text| {
                let mut vector = vec![0.0f32; 64];
                for word in text.to_lowercase().split(|c: char| !c.is_alphanumeric()) {
                    if word.len() > 2 {
                        let mut hasher = DefaultHasher::new();
                        word.hash(&mut hasher);
                        vector[(hasher.finish() % 64) as usize] += 1.0;
                    }
                }
                vector
            })
            .collect())
    }
}

#[tokio::test]
async fn with_embeddings_the_hybrid_selection_embeds_each_tool_once_across_runs() {
    use toolbelt_search::embed::{EmbeddingIndex, MemoryVectorStore};
    let main = ScriptedServer::start([Reply::text("one"), Reply::text("two")])
        .await
        .unwrap();
    let embeddings = EmbeddingIndex::new(
        Arc::new(WordHashEmbedder),
        Arc::new(MemoryVectorStore::new()),
    );
    let search = ToolSearch::builder()
        .index(Method::Hybrid)
        .embeddings(embeddings)
        .max_tools(2)
        .build()
        .unwrap();
    let runner = runner_with_plugin(&main, &search);
    no_errors(
        &run(
            &runner,
            "s",
            "translate this text into French",
            RunOptions::new(),
        )
        .await,
    );
    no_errors(
        &run(
            &runner,
            "s",
            "play a song on the speaker",
            RunOptions::new(),
        )
        .await,
    );

    let offered = offered(&main);
    assert!(
        offered[0].contains(&"translate_text".to_string()),
        "{offered:?}"
    );
    assert!(
        offered[1].contains(&"play_music".to_string()),
        "{offered:?}"
    );
    assert!(offered.iter().all(|o| o.len() == 2), "{offered:?}");
    // Every tool embedded once, in the first run; the second run reused the index.
    let stats = search.index_stats();
    assert_eq!(
        (stats.syncs, stats.added, stats.embedded),
        (2, CATALOG.len(), CATALOG.len())
    );
}
