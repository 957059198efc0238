//! HTML to chunkable text: headings as `#` lines, block elements as paragraphs, `<pre>` as
//! code fences, scripts, styles and page furniture dropped.
//!
//! Only html5ever's tokenizer runs, no tree builder: tokenizing is linear in the input, and a
//! page nested 100,000 deep costs no more than a flat one (the tree builder's open-element
//! scans are what make deep nesting slow; see builtin's `web/dom.rs`). What is lost is the
//! tree builder's repair of broken markup, which text extraction does not need.

use std::cell::RefCell;

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::states::RawKind;
use html5ever::tokenizer::{
    BufferQueue, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};

/// Text and title of a page.
pub(crate) struct Page {
    pub(crate) text: String,
    pub(crate) title: Option<String>,
}

/// Elements whose content is not text for a reader.
const SKIPPED: &[&str] = &[
    "script", "style", "noscript", "template", "nav", "svg", "head", "iframe", "object",
];
/// Elements that end a paragraph.
const BLOCKS: &[&str] = &[
    "p",
    "div",
    "section",
    "article",
    "main",
    "header",
    "footer",
    "aside",
    "li",
    "ul",
    "ol",
    "table",
    "tr",
    "blockquote",
    "dl",
    "dt",
    "dd",
    "br",
    "hr",
    "figure",
    "figcaption",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "pre",
    "body",
];

#[derive(Default)]
struct State {
    out: String,
    /// The current paragraph's text, whitespace collapsed.
    line: String,
    /// How many skipped elements are open (their text is dropped).
    skipping: usize,
    in_pre: bool,
    in_title: bool,
    title: String,
    heading: Option<usize>,
    /// Whitespace was seen since the last word (a browser shows one space).
    space: bool,
}

impl State {
    fn end_paragraph(&mut self) {
        let text = self.line.trim();
        if !text.is_empty() {
            if let Some(level) = self.heading {
                self.out.push_str(&"#".repeat(level));
                self.out.push(' ');
            }
            self.out.push_str(text);
            self.out.push_str("\n\n");
        }
        self.line.clear();
        self.space = false;
    }

    fn text(&mut self, text: &str) {
        if self.in_title {
            self.title.push_str(text);
            return;
        }
        if self.skipping > 0 {
            return;
        }
        if self.in_pre {
            self.out.push_str(text);
            return;
        }
        for c in text.chars() {
            if c.is_whitespace() {
                self.space = !self.line.is_empty();
            } else {
                if self.space {
                    self.line.push(' ');
                    self.space = false;
                }
                self.line.push(c);
            }
        }
    }
}

struct Sink(RefCell<State>);

impl TokenSink for Sink {
    type Handle = ();

    fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
        let mut s = self.0.borrow_mut();
        match token {
            Token::CharacterTokens(text) => s.text(&text),
            Token::TagToken(tag) => {
                let name: &str = &tag.name;
                let start = tag.kind == TagKind::StartTag;
                if name == "title" {
                    s.in_title = start && !tag.self_closing;
                    return if s.in_title {
                        TokenSinkResult::RawData(RawKind::Rcdata)
                    } else {
                        TokenSinkResult::Continue
                    };
                }
                if SKIPPED.contains(&name) && name != "head" {
                    if start && !tag.self_closing {
                        s.skipping += 1;
                        if matches!(name, "script" | "style" | "noscript" | "template") {
                            // Their content is raw text up to the end tag, not markup.
                            let kind = if name == "script" {
                                RawKind::ScriptData
                            } else {
                                RawKind::Rawtext
                            };
                            return TokenSinkResult::RawData(kind);
                        }
                    } else if !start {
                        s.skipping = s.skipping.saturating_sub(1);
                    }
                    return TokenSinkResult::Continue;
                }
                if name == "pre" {
                    s.end_paragraph();
                    if start {
                        s.out.push_str("```\n");
                        s.in_pre = true;
                    } else if s.in_pre {
                        if !s.out.ends_with('\n') {
                            s.out.push('\n');
                        }
                        s.out.push_str("```\n\n");
                        s.in_pre = false;
                    }
                    return TokenSinkResult::Continue;
                }
                if let Some(level) = heading_level(name) {
                    s.end_paragraph();
                    s.heading = start.then_some(level);
                    return TokenSinkResult::Continue;
                }
                if BLOCKS.contains(&name) && !s.in_pre {
                    s.end_paragraph();
                }
            }
            Token::EOFToken => {
                s.end_paragraph();
                if s.in_pre {
                    s.out.push_str("\n```\n");
                    s.in_pre = false;
                }
            }
            _ => {}
        }
        TokenSinkResult::Continue
    }
}

fn heading_level(name: &str) -> Option<usize> {
    match name {
        "h1" => Some(1),
        "h2" => Some(2),
        "h3" => Some(3),
        "h4" => Some(4),
        "h5" => Some(5),
        "h6" => Some(6),
        _ => None,
    }
}

/// The page's text with Markdown headings and fences, and its `<title>`.
pub(crate) fn to_text(html: &str) -> Page {
    let tokenizer = Tokenizer::new(
        Sink(RefCell::new(State::default())),
        TokenizerOpts::default(),
    );
    let input = BufferQueue::default();
    input.push_back(StrTendril::from_slice(html));
    let _ = tokenizer.feed(&input);
    tokenizer.end();
    let state = tokenizer.sink.0.into_inner();
    let title = state.title.split_whitespace().collect::<Vec<_>>().join(" ");
    Page {
        text: state.out,
        title: (!title.is_empty()).then_some(title),
    }
}
