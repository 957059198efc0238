//! YAML from files a project or a user hands Toolbelt (SKILL.md front matter, `--agents`
//! files), parsed within bounds on nesting and on the size anchors and aliases expand to.
//!
//! An alias is a pointer to an earlier node: `a: &a [1, 1, …]` then `b: [*a, *a, …]` is a few
//! kilobytes of text that expands to millions of values, and the YAML parser's own limit
//! counts alias *uses*, not what they expand to (20,000 uses of a 20,000-element list passed
//! it and took gigabytes). So the text is first walked once, counting every value as an
//! expanded document would hold it (each alias counts its whole target again) and stopping at
//! [`MAX_NODES`]; only a document within that bound is then parsed for real.

use serde::de::{DeserializeOwned, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use std::cell::Cell;
use std::fmt;

/// The most values (scalars, lists, mappings) a document may hold once its aliases are
/// expanded. A skill's front matter or an agents file holds tens to hundreds.
pub const MAX_NODES: usize = 100_000;

/// The deepest nesting a document may have: the YAML parser's time grows steeply with it,
/// so a hostile file is refused before it is parsed.
pub const MAX_NESTING: usize = 64;

/// Parses `text` as `T`, refusing (with a message naming the bound) a document that nests
/// deeper than [`MAX_NESTING`] or expands to more than [`MAX_NODES`] values.
pub fn from_str_bounded<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    if let Some(problem) = too_deep(text) {
        return Err(problem);
    }
    count_nodes(text)?;
    serde_norway::from_str(text).map_err(|e| format!("not valid YAML: {e}"))
}

/// Why `yaml` nests too deep to be parsed, if it does: `[`/`{` opened (counted outside
/// quotes only roughly: a string holding 64 brackets is refused too) or indentation levels.
fn too_deep(yaml: &str) -> Option<String> {
    let mut depth = 0usize;
    let mut deepest = 0usize;
    for c in yaml.chars() {
        match c {
            '[' | '{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    let indent = yaml
        .lines()
        .map(|l| l.len() - l.trim_start_matches([' ', '\t']).len())
        .max()
        .unwrap_or(0);
    (deepest > MAX_NESTING || indent > 2 * MAX_NESTING).then(|| {
        format!(
            "nests deeper than {MAX_NESTING} levels (brackets or indentation); such a file \
             is a short mapping"
        )
    })
}

/// Walks the document as serde sees it, aliases expanded, and fails once it has seen more
/// than [`MAX_NODES`] values. Builds nothing, so the walk itself stays small.
fn count_nodes(yaml: &str) -> Result<(), String> {
    let left = Cell::new(MAX_NODES);
    let too_large = || {
        format!(
            "expands to more than {MAX_NODES} values (anchors and aliases counted as often as \
             they are used); such a file is a short mapping"
        )
    };
    let deserializer = serde_norway::Deserializer::from_str(yaml);
    match (Counter { left: &left }).deserialize(deserializer) {
        Ok(()) => Ok(()),
        Err(_) if left.get() == 0 => Err(too_large()),
        Err(e) => Err(format!("not valid YAML: {e}")),
    }
}

/// A seed that counts one value and, through its visitor, every value inside it.
#[derive(Clone, Copy)]
struct Counter<'a> {
    left: &'a Cell<usize>,
}

impl Counter<'_> {
    fn take<E: serde::de::Error>(self) -> Result<(), E> {
        match self.left.get() {
            0 => Err(E::custom("too many values")),
            n => {
                self.left.set(n - 1);
                Ok(())
            }
        }
    }
}

impl<'de> DeserializeSeed<'de> for Counter<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Counter<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<(), E> {
        self.take()
    }
    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<(), E> {
        self.take()
    }
    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<(), E> {
        self.take()
    }
    fn visit_i128<E: serde::de::Error>(self, _: i128) -> Result<(), E> {
        self.take()
    }
    fn visit_u128<E: serde::de::Error>(self, _: u128) -> Result<(), E> {
        self.take()
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<(), E> {
        self.take()
    }
    fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<(), E> {
        self.take()
    }
    fn visit_bytes<E: serde::de::Error>(self, _: &[u8]) -> Result<(), E> {
        self.take()
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        self.take()
    }
    fn visit_none<E: serde::de::Error>(self) -> Result<(), E> {
        self.take()
    }
    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        self.deserialize(deserializer)
    }
    fn visit_newtype_struct<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        self.deserialize(deserializer)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.take()?;
        while seq.next_element_seed(self)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.take()?;
        while map.next_key_seed(self)?.is_some() {
            map.next_value_seed(self)?;
        }
        Ok(())
    }
    fn visit_enum<A: serde::de::EnumAccess<'de>>(self, data: A) -> Result<(), A::Error> {
        // A tagged value (`!tag value`): count the tag's value like any other.
        use serde::de::VariantAccess;
        self.take()?;
        let (_, variant) = data.variant::<serde::de::IgnoredAny>()?;
        variant.newtype_variant_seed(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize)]
    struct Any(serde_norway::Value);

    #[test]
    fn a_short_mapping_with_a_benign_alias_parses() {
        let v: Any = from_str_bounded("a: &x [1, 2]\nb: *x\n").unwrap();
        assert_eq!(v.0["b"][1], serde_norway::Value::from(2));
    }

    #[test]
    fn an_alias_bomb_is_refused_before_it_expands() {
        // 20,000 uses of a 20,000-element list: 400 million values if expanded.
        let list = vec!["1"; 20_000].join(",");
        let uses = vec!["*d"; 20_000].join(",");
        let bomb = format!("d: &d [{list}]\nx: [{uses}]\n");
        let error = from_str_bounded::<Any>(&bomb).err().unwrap();
        assert!(error.contains("expands to more than"), "{error}");
    }

    #[test]
    fn the_count_includes_values_inside_tags() {
        let many = vec!["1"; MAX_NODES + 10].join(",");
        let error = from_str_bounded::<Any>(&format!("a: !t [{many}]\n"))
            .err()
            .unwrap();
        assert!(error.contains("expands to more than"), "{error}");
    }

    #[test]
    fn bad_yaml_is_named_as_such() {
        let error = from_str_bounded::<Any>("a: [1, 2\n").err().unwrap();
        assert!(error.starts_with("not valid YAML"), "{error}");
    }
}
