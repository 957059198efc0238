//! The state a graph carries from node to node, and how nodes' updates are merged into it.
//!
//! A state is a struct; each node returns an *update* (the same fields, each optional) and
//! the graph merges it field by field with that field's [`Reducer`]: [`Replace`] unless the
//! field says otherwise, [`Append`] for lists (the conversation), [`Sum`] for counters. The
//! merge happens after every super-step, in node declaration order, so nodes running in the
//! same step never see each other's writes and the result does not depend on which finished
//! first. Write states with the [`state!`](crate::state!) macro.

use std::ops::AddAssign;

use serde::Serialize;
use serde::de::DeserializeOwned;
use toolbelt_model::Message;

/// How a field's update is merged into its current value.
pub trait Reducer<T> {
    /// Merges `update` into `current`.
    fn reduce(current: &mut T, update: T);
}

/// The update replaces the value (the default reducer).
#[derive(Debug, Clone, Copy)]
pub struct Replace;

impl<T> Reducer<T> for Replace {
    fn reduce(current: &mut T, update: T) {
        *current = update;
    }
}

/// The update's items are appended to the list.
#[derive(Debug, Clone, Copy)]
pub struct Append;

impl<T> Reducer<Vec<T>> for Append {
    fn reduce(current: &mut Vec<T>, update: Vec<T>) {
        current.extend(update);
    }
}

/// The update is added to the value (counters, totals).
#[derive(Debug, Clone, Copy)]
pub struct Sum;

impl<T: AddAssign> Reducer<T> for Sum {
    fn reduce(current: &mut T, update: T) {
        *current += update;
    }
}

/// A graph's state. It is serialised into a checkpoint after every super-step, so a later
/// run (in another process) resumes from it; the update is serialised into each
/// `node_ended` event as the node's state delta.
///
/// Write it with [`state!`](crate::state!) rather than by hand.
pub trait State: Clone + Default + Serialize + DeserializeOwned + Send + Sync + 'static {
    /// What a node returns: each field optional, merged with the field's reducer.
    type Update: Default + Serialize + Send + Sync + 'static;

    /// Merges `update` into the state, field by field.
    fn apply(&mut self, update: Self::Update);

    /// The conversation, for model, tools and agent nodes (the field declared with the
    /// `Messages` reducer); `None` for a state without one.
    fn messages(&self) -> Option<&[Message]> {
        None
    }

    /// An update appending `messages` to the conversation; `None` for a state without one.
    fn append_messages(messages: Vec<Message>) -> Option<Self::Update> {
        let _ = messages;
        None
    }
}

/// Declares a graph state and its update type.
///
/// Each field names its reducer after `=>`: `Append` (lists), `Sum` (counters), `Replace`
/// (the default when none is named), `Messages` (a `Vec<Message>` appended to: the
/// conversation model, tools and agent nodes read and extend; at most one), or any type of
/// yours that implements [`Reducer`]. The update type has the same fields, each an `Option`,
/// and a setter per field (`FlowUpdate::default().turns(1)`).
///
/// ```
/// use toolbelt_graph::{State, state};
/// use toolbelt_model::Message;
///
/// state! {
///     /// An approval flow.
///     pub struct Flow => FlowUpdate {
///         /// The conversation.
///         pub messages: Vec<Message> => Messages,
///         /// How many drafts were written.
///         pub drafts: u32 => Sum,
///         /// The reviewer's verdict.
///         pub verdict: Option<String>,
///     }
/// }
///
/// let mut flow = Flow::default();
/// flow.apply(FlowUpdate::default().drafts(1).verdict(Some("ok".into())));
/// flow.apply(FlowUpdate::default().drafts(2));
/// assert_eq!((flow.drafts, flow.verdict.as_deref()), (3, Some("ok")));
/// assert!(flow.messages().is_some());
/// ```
#[macro_export]
macro_rules! state {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident => $update:ident {
            $(
                $(#[$fmeta:meta])*
                $fvis:vis $field:ident : $fty:ty $(=> $reducer:ident)?
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
        #[serde(default)]
        $vis struct $name {
            $( $(#[$fmeta])* $fvis $field: $fty, )*
        }

        #[doc = concat!("An update of [`", stringify!($name), "`]: each field set is merged with its reducer.")]
        #[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
        $vis struct $update {
            $(
                $(#[$fmeta])*
                #[serde(skip_serializing_if = "Option::is_none")]
                $fvis $field: Option<$fty>,
            )*
        }

        impl $update {
            $(
                #[doc = concat!("Sets `", stringify!($field), "`.")]
                #[allow(dead_code)]
                $fvis fn $field(mut self, value: $fty) -> Self {
                    self.$field = Some(value);
                    self
                }
            )*
        }

        impl $crate::State for $name {
            type Update = $update;

            fn apply(&mut self, update: $update) {
                $(
                    if let Some(value) = update.$field {
                        <$crate::__reducer!($($reducer)?) as $crate::Reducer<$fty>>::reduce(
                            &mut self.$field,
                            value,
                        );
                    }
                )*
            }

            fn messages(&self) -> Option<&[$crate::__private::Message]> {
                None $( .or($crate::__messages_field!(self, $field, $($reducer)?)) )*
            }

            #[allow(unused_mut, unused_variables)]
            fn append_messages(
                messages: Vec<$crate::__private::Message>,
            ) -> Option<$update> {
                let mut messages = Some(messages);
                let mut update = $update::default();
                let mut found = false;
                $( $crate::__append_field!(update, found, messages, $field, $($reducer)?); )*
                found.then_some(update)
            }
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __reducer {
    () => {
        $crate::Replace
    };
    (Messages) => {
        $crate::Append
    };
    (Append) => {
        $crate::Append
    };
    (Sum) => {
        $crate::Sum
    };
    (Replace) => {
        $crate::Replace
    };
    ($other:ident) => {
        $other
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __messages_field {
    ($self:ident, $field:ident, Messages) => {
        Some($self.$field.as_slice())
    };
    ($self:ident, $field:ident, $($other:ident)?) => {
        None
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __append_field {
    ($update:ident, $found:ident, $messages:ident, $field:ident, Messages) => {
        if let Some(value) = $messages.take() {
            $update.$field = Some(value);
            $found = true;
        }
    };
    ($update:ident, $found:ident, $messages:ident, $field:ident, $($other:ident)?) => {};
}
