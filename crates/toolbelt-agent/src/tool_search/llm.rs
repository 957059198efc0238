//! The two model calls of tool search: choosing tools from a list, and rewriting a
//! question into a search query.

use futures::StreamExt;
use toolbelt_model::{DynModel, GenerationConfig, Message, Request};

use super::usage::ToolSearchUsage;
use crate::Invocation;

/// The longest description line sent to the search model per tool, in characters.
const DESCRIPTION_CHARS: usize = 200;

/// Asks `model` which of `candidates` the question needs: at most `max` names, known
/// names only, best first.
pub(super) async fn choose(
    model: &DynModel,
    inv: Option<&Invocation>,
    question: &str,
    candidates: &[(&str, &str)],
    max: usize,
) -> Result<Vec<String>, String> {
    let mut list = String::new();
    for (name, description) in candidates {
        list.push_str("- ");
        list.push_str(name);
        let line = first_line(description);
        if !line.is_empty() {
            list.push_str(": ");
            list.push_str(&line);
        }
        list.push('\n');
    }
    let system = format!(
        "You choose the tools an assistant needs to handle a user's request. From the tools \
         listed, pick at most {max} that the assistant is most likely to call for this \
         request, most useful first. Answer with a JSON array of tool names and nothing \
         else, e.g. [\"read_file\", \"search\"]; answer [] if no tool is needed."
    );
    let user = format!("Tools:\n{list}\nUser request:\n{question}");
    let answer = ask(model, inv, system, user).await?;
    let names = parse_names(&answer).ok_or_else(|| {
        format!(
            "the search model's answer is not a JSON list of tool names: {:?}",
            shorten(&answer, 200)
        )
    })?;
    let mut chosen: Vec<String> = Vec::new();
    for name in names {
        let known = candidates.iter().any(|(known, _)| *known == name);
        if known && !chosen.contains(&name) {
            chosen.push(name);
        }
        if chosen.len() == max {
            break;
        }
    }
    Ok(chosen)
}

/// Asks `model` for a short search query for the question; the question itself when the
/// answer is empty.
pub(super) async fn rewrite(
    model: &DynModel,
    inv: &Invocation,
    question: &str,
) -> Result<String, String> {
    let system = "Rewrite the user's request as a short search query for a catalogue of \
                  tools: name the actions and the objects the needed tools deal with. Answer \
                  with the query only."
        .to_string();
    let answer = ask(model, Some(inv), system, question.to_string()).await?;
    let query = answer.trim();
    Ok(if query.is_empty() {
        question.to_string()
    } else {
        query.to_string()
    })
}

/// One non-streamed model call with a system and a user message; records its usage in the
/// run of `inv`, and stops when that run is cancelled.
async fn ask(
    model: &DynModel,
    inv: Option<&Invocation>,
    system: String,
    user: String,
) -> Result<String, String> {
    let config = GenerationConfig {
        stream: false,
        temperature: Some(0.0),
        ..GenerationConfig::default()
    };
    let request =
        Request::new(vec![Message::system(system), Message::user(user)]).with_config(config);
    let call = async {
        let mut stream = model.generate(request).await.map_err(|e| e.to_string())?;
        let mut last = None;
        while let Some(item) = stream.next().await {
            let response = item.map_err(|e| e.to_string())?;
            if !response.partial {
                last = Some(response);
            }
        }
        last.ok_or_else(|| "the search model's response ended without a message".to_string())
    };
    let response = match inv {
        Some(inv) => tokio::select! {
            biased;
            () = inv.cancellation().cancelled() => return Err("the run was cancelled".into()),
            response = call => response,
        },
        None => call.await,
    };
    let response = match response {
        Ok(response) => response,
        Err(error) => {
            if let Some(inv) = inv {
                ToolSearchUsage::record(inv, None);
            }
            return Err(format!("the search model failed: {error}"));
        }
    };
    if let Some(inv) = inv {
        ToolSearchUsage::record(inv, response.usage);
    }
    response
        .message
        .map(|m| m.content)
        .ok_or_else(|| "the search model's response ended without a message".to_string())
}

/// The tool names in an answer: a JSON array of strings, or an object with a `tools`
/// array, anywhere in the text (models wrap JSON in prose or code fences).
fn parse_names(answer: &str) -> Option<Vec<String>> {
    let strings = |value: &serde_json::Value| -> Option<Vec<String>> {
        value
            .as_array()?
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect()
    };
    let start = answer.find(['[', '{'])?;
    let mut values =
        serde_json::Deserializer::from_str(&answer[start..]).into_iter::<serde_json::Value>();
    let value = values.next()?.ok()?;
    strings(&value).or_else(|| strings(value.get("tools")?))
}

fn first_line(text: &str) -> String {
    shorten(
        text.lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim(),
        DESCRIPTION_CHARS,
    )
}

fn shorten(text: &str, chars: usize) -> String {
    toolbelt_core::text::shorten(text, chars).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_read_from_arrays_objects_and_fenced_answers() {
        assert_eq!(
            parse_names(r#"["a", "b"]"#),
            Some(vec!["a".into(), "b".into()])
        );
        assert_eq!(
            parse_names("Sure:\n```json\n[\"x\"]\n```"),
            Some(vec!["x".into()])
        );
        assert_eq!(parse_names(r#"{"tools": ["y"]}"#), Some(vec!["y".into()]));
        assert_eq!(parse_names("[]"), Some(vec![]));
        assert_eq!(parse_names("read_file and search"), None);
        assert_eq!(parse_names("[1, 2]"), None);
    }

    #[test]
    fn long_descriptions_are_cut_at_a_character_boundary() {
        let text = "é".repeat(300);
        let cut = first_line(&text);
        assert_eq!(cut.chars().count(), DESCRIPTION_CHARS);
    }
}
