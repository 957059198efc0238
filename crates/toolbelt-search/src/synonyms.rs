//! A small curated table of words that users and tools use for the same action or object,
//! for query expansion in [`crate::Bm25Index`].
//!
//! A query word found in a group also looks up the group's other words, at a lower weight
//! than the word itself ([`crate::Tuning::synonym_weight`]), so a synonym can bring a tool
//! into the results ("mail bob" finds `send_email`) but a tool that has the query's own word
//! keeps its lead. Groups are matched by stem ([`crate::stem`]), so `emails`, `emailed` and
//! `mailing` find the group too.
//!
//! Kept short on purpose: every entry is a pair of words that tool names and descriptions
//! really use for the same thing (MCP servers, OpenAPI operations, BFCL's functions), and
//! nothing that one word means more widely than the other in a way that would pull in
//! unrelated tools (so no `track` for a song, as parcels and time are tracked too). Why each
//! group is here:
//!
//! | group | why |
//! |---|---|
//! | email, mail | `send_email`, `gmail_send`, `mail_send`, "send a mail": one object, two names |
//! | message, email | a user who says "message Bob" may mean an email tool (`send_message` covers chat) |
//! | delete, remove, erase | `delete_file`, `remove_item`, `rm`/"erase": the three verbs for one action |
//! | find, search, lookup, locate | `search_code`, `find_files`, `lookup_user`, `locate_store` |
//! | create, make, new | `create_event`, `make_dir`, `new_issue` |
//! | list, show, display | `list_tables`, `show_tables`, "display my calendar" |
//! | get, fetch, retrieve | `get_user`, `fetch_url`, `retrieve_document`: reading one thing |
//! | weather, forecast | weather tools describe forecasts and forecast tools the weather |
//! | update, modify, edit, change | `update_record`, `edit_file`, `modify_settings`, "change my password" |
//! | start, launch | `start_server`, `launch_app` |
//! | stop, terminate, kill | `stop_instance`, `terminate_process`, `kill_session` |
//! | picture, image, photo | `generate_image`, "take a photo", "draw a picture" |
//! | buy, purchase, order | `purchase_item`, `place_order`, "buy tickets" |
//! | book, reserve | `book_hotel`, `reserve_table` |
//! | calculate, compute | `calculate_area`, `compute_distance` |
//! | movie, film | `find_movies`, "film showtimes" |
//! | car, vehicle | `rent_car`, `vehicle_status` |

use std::collections::HashMap;
use std::sync::LazyLock;

use crate::stem::stem;

/// The groups; see the [module docs](self) for why each is here. Words are written plainly
/// and stemmed once, when the table is first used.
const GROUPS: &[&[&str]] = &[
    &["email", "mail"],
    &["message", "email"],
    &["delete", "remove", "erase"],
    &["find", "search", "lookup", "locate"],
    &["create", "make", "new"],
    &["list", "show", "display"],
    &["get", "fetch", "retrieve"],
    &["weather", "forecast"],
    &["update", "modify", "edit", "change"],
    &["start", "launch"],
    &["stop", "terminate", "kill"],
    &["picture", "image", "photo"],
    &["buy", "purchase", "order"],
    &["book", "reserve"],
    &["calculate", "compute"],
    &["movie", "film"],
    &["car", "vehicle"],
];

/// Each stem's synonyms, as stems, without the stem itself and without repeats.
static BY_STEM: LazyLock<HashMap<String, Vec<String>>> = LazyLock::new(|| {
    let mut map: HashMap<String, Vec<String>> = HashMap::new();
    let mut buf = String::new();
    for group in GROUPS {
        let stems: Vec<String> = group.iter().map(|w| stem(w, &mut buf).to_owned()).collect();
        for s in &stems {
            let entry = map.entry(s.clone()).or_default();
            for other in &stems {
                if other != s && !entry.contains(other) {
                    entry.push(other.clone());
                }
            }
        }
    }
    map
});

/// The stems that mean the same as the stem `stemmed` for picking a tool (empty for most
/// words).
///
/// ```
/// use toolbelt_search::synonyms::synonyms_of;
/// assert!(synonyms_of("mail").iter().any(|s| s == "email"));
/// assert!(synonyms_of("bob").is_empty());
/// ```
pub fn synonyms_of(stemmed: &str) -> &'static [String] {
    BY_STEM.get(stemmed).map_or(&[], Vec::as_slice)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_are_symmetric_and_never_contain_the_word_itself() {
        for (word, others) in BY_STEM.iter() {
            assert!(!others.contains(word), "{word}");
            for other in others {
                assert!(synonyms_of(other).contains(word), "{other} -> {word}");
            }
        }
    }

    #[test]
    fn every_word_of_a_group_has_its_own_stem() {
        let mut buf = String::new();
        for group in GROUPS {
            let mut stems: Vec<String> = Vec::new();
            for w in *group {
                let s = stem(w, &mut buf).to_owned();
                assert!(!stems.contains(&s), "{w} collides in {group:?}");
                stems.push(s);
            }
        }
    }
}
