//! [`Filter`]: a metadata filter the model writes, checked against declared fields before it
//! selects anything.
//!
//! The model's filter is JSON:
//!
//! - `{"field": value}`: the field equals the value;
//! - `{"field": {"$op": value, ...}}`: every operator holds (`$eq`, `$ne`, `$in`, `$nin`,
//!   `$gt`, `$gte`, `$lt`, `$lte`, `$contains`, `$prefix`);
//! - `{"$and": [f, ...]}`, `{"$or": [f, ...]}`, `{"$not": f}`; several keys in one object
//!   all hold.
//!
//! [`Filter::parse`] checks every field against the [`FieldSpec`]s of the knowledge base,
//! every operator against the field's type, and every value's type, within bounds (depth 8,
//! 64 conditions, strings of 512 characters, lists of 64 values). The parsed filter is a tree
//! evaluated in Rust on each chunk's metadata: no value ever becomes query text of a store, so
//! `"' OR 1=1 --"` is a string that no chunk's field equals, nothing more.

use serde_json::Value;

use crate::KnowledgeError;
use crate::chunk::Chunk;

const MAX_DEPTH: usize = 8;
const MAX_CONDITIONS: usize = 64;
const MAX_STRING_CHARS: usize = 512;
const MAX_LIST: usize = 64;

/// The type of a filterable field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldType {
    /// A string (`$eq`, `$ne`, `$in`, `$nin`, `$contains`, `$prefix`).
    String,
    /// A number (`$eq`, `$ne`, `$in`, `$nin`, `$gt`, `$gte`, `$lt`, `$lte`).
    Number,
    /// A boolean (`$eq`, `$ne`).
    Bool,
    /// A list of strings: `$contains` (or a plain value) holds when one element equals it,
    /// `$in` when one element is among the values.
    StringList,
}

impl FieldType {
    fn name(self) -> &'static str {
        match self {
            FieldType::String => "string",
            FieldType::Number => "number",
            FieldType::Bool => "boolean",
            FieldType::StringList => "list of strings",
        }
    }

    fn operators(self) -> &'static [Op] {
        use Op::*;
        match self {
            FieldType::String => &[Eq, Ne, In, Nin, Contains, Prefix],
            FieldType::Number => &[Eq, Ne, In, Nin, Gt, Gte, Lt, Lte],
            FieldType::Bool => &[Eq, Ne],
            FieldType::StringList => &[Eq, Contains, In, Nin],
        }
    }
}

/// A field the model may filter on.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldSpec {
    /// The field's name in the filter.
    pub name: String,
    /// Its type.
    pub kind: FieldType,
    /// What it means, for the tool's description.
    pub description: String,
}

impl FieldSpec {
    /// A user field (from front matter or [`Source::with_field`](crate::Source::with_field)).
    pub fn new(name: impl Into<String>, kind: FieldType, description: impl Into<String>) -> Self {
        FieldSpec {
            name: name.into(),
            kind,
            description: description.into(),
        }
    }
}

/// The fields every chunk has.
pub(crate) fn builtin_fields() -> Vec<FieldSpec> {
    vec![
        FieldSpec::new("source", FieldType::String, "the file path or URL"),
        FieldSpec::new(
            "kind",
            FieldType::String,
            "markdown, code, text, html or pdf",
        ),
        FieldSpec::new("title", FieldType::String, "the document's title"),
        FieldSpec::new(
            "heading",
            FieldType::StringList,
            "the headings the chunk sits under",
        ),
        FieldSpec::new("line", FieldType::Number, "the chunk's first line"),
    ]
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    In,
    Nin,
    Gt,
    Gte,
    Lt,
    Lte,
    Contains,
    Prefix,
}

impl Op {
    fn parse(name: &str) -> Option<Op> {
        Some(match name {
            "$eq" => Op::Eq,
            "$ne" => Op::Ne,
            "$in" => Op::In,
            "$nin" => Op::Nin,
            "$gt" => Op::Gt,
            "$gte" => Op::Gte,
            "$lt" => Op::Lt,
            "$lte" => Op::Lte,
            "$contains" => Op::Contains,
            "$prefix" => Op::Prefix,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Op::Eq => "$eq",
            Op::Ne => "$ne",
            Op::In => "$in",
            Op::Nin => "$nin",
            Op::Gt => "$gt",
            Op::Gte => "$gte",
            Op::Lt => "$lt",
            Op::Lte => "$lte",
            Op::Contains => "$contains",
            Op::Prefix => "$prefix",
        }
    }
}

/// A checked value.
#[derive(Debug, Clone, PartialEq)]
enum Scalar {
    String(String),
    Number(f64),
    Bool(bool),
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    And(Vec<Node>),
    Or(Vec<Node>),
    Not(Box<Node>),
    Cond {
        field: String,
        kind: FieldType,
        op: Op,
        values: Vec<Scalar>,
    },
}

/// A checked metadata filter; see the [module docs](self).
#[derive(Debug, Clone, PartialEq)]
pub struct Filter {
    root: Node,
}

struct Parser<'a> {
    fields: &'a [FieldSpec],
    conditions: usize,
}

impl Filter {
    /// Checks `value` against `fields` (the knowledge base's declared fields, built-in ones
    /// included) and returns the filter, or an error that says what is wrong and what is
    /// allowed.
    pub fn parse(value: &Value, fields: &[FieldSpec]) -> Result<Filter, KnowledgeError> {
        let mut parser = Parser {
            fields,
            conditions: 0,
        };
        Ok(Filter {
            root: parser.node(value, 0)?,
        })
    }

    /// Whether `chunk` passes the filter.
    pub fn matches(&self, chunk: &Chunk) -> bool {
        eval(&self.root, chunk)
    }
}

fn err(message: impl Into<String>) -> KnowledgeError {
    KnowledgeError::Filter(message.into())
}

impl Parser<'_> {
    fn node(&mut self, value: &Value, depth: usize) -> Result<Node, KnowledgeError> {
        if depth >= MAX_DEPTH {
            return Err(err(format!("nested deeper than {MAX_DEPTH} levels")));
        }
        let Value::Object(map) = value else {
            return Err(err(format!(
                "a filter is a JSON object such as {{\"source\": \"docs/a.md\"}}, not {}",
                kind_of(value)
            )));
        };
        if map.is_empty() {
            return Err(err(
                "an empty filter object selects nothing; leave the filter out",
            ));
        }
        let mut all = Vec::with_capacity(map.len());
        for (key, inner) in map {
            let node = match key.as_str() {
                "$and" | "$or" => {
                    let Value::Array(items) = inner else {
                        return Err(err(format!("{key} takes a list of filters")));
                    };
                    if items.is_empty() || items.len() > MAX_CONDITIONS {
                        return Err(err(format!(
                            "{key} takes 1 to {MAX_CONDITIONS} filters, got {}",
                            items.len()
                        )));
                    }
                    let nodes = items
                        .iter()
                        .map(|item| self.node(item, depth + 1))
                        .collect::<Result<Vec<_>, _>>()?;
                    if key == "$and" {
                        Node::And(nodes)
                    } else {
                        Node::Or(nodes)
                    }
                }
                "$not" => Node::Not(Box::new(self.node(inner, depth + 1)?)),
                _ if key.starts_with('$') => {
                    return Err(err(format!(
                        "unknown combinator {}: use $and, $or or $not, or a field name",
                        quoted(key)
                    )));
                }
                _ => self.field(key, inner)?,
            };
            all.push(node);
        }
        Ok(if all.len() == 1 {
            all.pop().unwrap_or(Node::And(Vec::new()))
        } else {
            Node::And(all)
        })
    }

    fn field(&mut self, name: &str, value: &Value) -> Result<Node, KnowledgeError> {
        let Some(spec) = self.fields.iter().find(|f| f.name == name) else {
            let known: Vec<&str> = self.fields.iter().map(|f| f.name.as_str()).collect();
            return Err(err(format!(
                "unknown field {}; the fields are: {}",
                quoted(name),
                known.join(", ")
            )));
        };
        let ops: Vec<(Op, &Value)> = match value {
            Value::Object(map) if map.keys().all(|k| k.starts_with('$')) && !map.is_empty() => {
                let mut ops = Vec::new();
                for (op_name, v) in map {
                    let Some(op) = Op::parse(op_name) else {
                        return Err(err(format!(
                            "unknown operator {} on {name}; {name} takes {}",
                            quoted(op_name),
                            op_list(spec.kind)
                        )));
                    };
                    ops.push((op, v));
                }
                ops
            }
            Value::Object(_) => {
                return Err(err(format!(
                    "{name} takes a value or {{\"$operator\": value}}, not an object of fields"
                )));
            }
            v => vec![(Op::Eq, v)],
        };
        let mut conds = Vec::with_capacity(ops.len());
        for (op, v) in ops {
            self.conditions += 1;
            if self.conditions > MAX_CONDITIONS {
                return Err(err(format!("more than {MAX_CONDITIONS} conditions")));
            }
            if !spec.kind.operators().contains(&op) {
                return Err(err(format!(
                    "{} does not apply to {name} ({}); it takes {}",
                    op.name(),
                    spec.kind.name(),
                    op_list(spec.kind)
                )));
            }
            let values = match op {
                Op::In | Op::Nin => {
                    let Value::Array(items) = v else {
                        return Err(err(format!("{} on {name} takes a list", op.name())));
                    };
                    if items.is_empty() || items.len() > MAX_LIST {
                        return Err(err(format!(
                            "{} on {name} takes 1 to {MAX_LIST} values",
                            op.name()
                        )));
                    }
                    items
                        .iter()
                        .map(|item| scalar(name, spec.kind, item))
                        .collect::<Result<Vec<_>, _>>()?
                }
                _ => vec![scalar(name, spec.kind, v)?],
            };
            conds.push(Node::Cond {
                field: name.to_owned(),
                kind: spec.kind,
                op,
                values,
            });
        }
        Ok(if conds.len() == 1 {
            conds.pop().unwrap_or(Node::And(Vec::new()))
        } else {
            Node::And(conds)
        })
    }
}

fn scalar(field: &str, kind: FieldType, value: &Value) -> Result<Scalar, KnowledgeError> {
    let wrong = || {
        err(format!(
            "{field} is a {}; got {}",
            kind.name(),
            kind_of(value)
        ))
    };
    match (kind, value) {
        (FieldType::String | FieldType::StringList, Value::String(s)) => {
            if s.chars().count() > MAX_STRING_CHARS {
                return Err(err(format!(
                    "a value for {field} is longer than {MAX_STRING_CHARS} characters"
                )));
            }
            Ok(Scalar::String(s.clone()))
        }
        (FieldType::Number, Value::Number(n)) => n
            .as_f64()
            .filter(|n| n.is_finite())
            .map(Scalar::Number)
            .ok_or_else(wrong),
        (FieldType::Bool, Value::Bool(b)) => Ok(Scalar::Bool(*b)),
        _ => Err(wrong()),
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// A name from the model, quoted and cut so an error cannot carry a page of it back.
fn quoted(name: &str) -> String {
    let cut: String = name.chars().take(64).collect();
    format!("{cut:?}")
}

fn op_list(kind: FieldType) -> String {
    kind.operators()
        .iter()
        .map(|op| op.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The values a chunk has for `field`: none when it lacks the field.
fn field_values(chunk: &Chunk, field: &str) -> Vec<Scalar> {
    let one = |s: &str| vec![Scalar::String(s.to_owned())];
    match field {
        "source" => one(&chunk.source),
        "kind" => one(chunk.kind.as_str()),
        "title" => chunk.title.as_deref().map(one).unwrap_or_default(),
        "heading" => chunk
            .heading_path
            .iter()
            .map(|h| Scalar::String(h.clone()))
            .collect(),
        "line" => chunk
            .lines
            .map(|(a, _)| vec![Scalar::Number(a as f64)])
            .unwrap_or_default(),
        _ => match chunk.fields.get(field) {
            Some(Value::String(s)) => one(s),
            Some(Value::Number(n)) => n.as_f64().map(Scalar::Number).into_iter().collect(),
            Some(Value::Bool(b)) => vec![Scalar::Bool(*b)],
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(|v| match v {
                    Value::String(s) => Some(Scalar::String(s.clone())),
                    Value::Number(n) => n.as_f64().map(Scalar::Number),
                    Value::Bool(b) => Some(Scalar::Bool(*b)),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        },
    }
}

fn eval(node: &Node, chunk: &Chunk) -> bool {
    match node {
        Node::And(nodes) => nodes.iter().all(|n| eval(n, chunk)),
        Node::Or(nodes) => nodes.iter().any(|n| eval(n, chunk)),
        Node::Not(inner) => !eval(inner, chunk),
        Node::Cond {
            field,
            kind,
            op,
            values,
        } => {
            let have = field_values(chunk, field);
            let any = |test: &dyn Fn(&Scalar) -> bool| have.iter().any(test);
            match op {
                Op::Contains if *kind == FieldType::String => {
                    let Scalar::String(want) = &values[0] else {
                        return false;
                    };
                    any(&|h| matches!(h, Scalar::String(s) if s.contains(want.as_str())))
                }
                Op::Eq | Op::Contains => any(&|h| h == &values[0]),
                Op::Ne => !any(&|h| h == &values[0]),
                Op::In => any(&|h| values.contains(h)),
                Op::Nin => !any(&|h| values.contains(h)),
                Op::Prefix => {
                    let Scalar::String(want) = &values[0] else {
                        return false;
                    };
                    any(&|h| matches!(h, Scalar::String(s) if s.starts_with(want.as_str())))
                }
                Op::Gt | Op::Gte | Op::Lt | Op::Lte => {
                    let Scalar::Number(want) = values[0] else {
                        return false;
                    };
                    any(&|h| match h {
                        Scalar::Number(n) => match op {
                            Op::Gt => *n > want,
                            Op::Gte => *n >= want,
                            Op::Lt => *n < want,
                            _ => *n <= want,
                        },
                        _ => false,
                    })
                }
            }
        }
    }
}
