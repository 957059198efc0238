//! The Mermaid export of a graph.

use std::fmt::Write;

use crate::State;
use crate::builder::{END, START};
use crate::graph::{Edge, Inner};

/// The flowchart text of `graph` (see [`Graph::mermaid`](crate::Graph::mermaid)).
pub(crate) fn render<S: State>(graph: &Inner<S>) -> String {
    let id = |name: &str| -> String {
        match name {
            START => "__start__".into(),
            END => "__end__".into(),
            _ => graph
                .index
                .get(name)
                .map_or_else(|| "missing".into(), |i| format!("n{i}")),
        }
    };
    let mut out = String::from("flowchart TD\n");
    out.push_str("    __start__([START])\n");
    for (i, (name, node)) in graph.nodes.iter().enumerate() {
        let label = label(name);
        let shape = match node.kind() {
            "model" => format!("([\"{label}\"])"),
            "tools" => format!("[[\"{label}\"]]"),
            "agent" | "subgraph" => format!("{{{{\"{label}\"}}}}"),
            _ => format!("[\"{label}\"]"),
        };
        let _ = writeln!(out, "    n{i}{shape}");
    }
    out.push_str("    __end__([END])\n");
    for edge in &graph.edges {
        match edge {
            Edge::Static { from, to } => {
                let _ = writeln!(out, "    {} --> {}", id(from), id(to));
            }
            Edge::Conditional { from, targets, .. } => {
                for to in targets {
                    let _ = writeln!(out, "    {} -.-> {}", id(from), id(to));
                }
            }
            Edge::Join { from, to } => {
                let sources: Vec<String> = from.iter().map(|s| id(s)).collect();
                let _ = writeln!(out, "    {} ==> {}", sources.join(" & "), id(to));
            }
        }
    }
    out
}

/// A node name as a quoted Mermaid label: quotes and markup characters as entities.
fn label(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        match c {
            '"' => out.push_str("#quot;"),
            '<' => out.push_str("#lt;"),
            '>' => out.push_str("#gt;"),
            '\n' | '\r' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}
