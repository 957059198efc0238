//! [`FallbackModel`]: several models tried in order for each turn.

use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;

use crate::{DynModel, Model, ModelError, Request, ResponseStream};

/// What a [`FallbackModel`] tells its observer when a turn moves on to the next model.
#[derive(Debug, Clone)]
pub struct FallbackNotice {
    /// The model that failed (its [`Model::name`]).
    pub from: String,
    /// The model the turn moves to.
    pub to: String,
    /// Why: the failure, after that model's own retry budget was spent.
    pub error: String,
}

impl std::fmt::Display for FallbackNotice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "model {} failed ({}); this turn goes on with {}",
            self.from, self.error, self.to
        )
    }
}

/// `stream` with `warnings` added to its final response, ahead of the model's own.
fn with_warnings(stream: ResponseStream, warnings: Vec<String>) -> ResponseStream {
    if warnings.is_empty() {
        return stream;
    }
    stream
        .map(move |item| {
            item.map(|mut response| {
                if !response.partial {
                    let own = std::mem::take(&mut response.warnings);
                    response.warnings = warnings.iter().cloned().chain(own).collect();
                }
                response
            })
        })
        .boxed()
}

/// Hears of each move to the next model (to show a user, or to record as an event).
pub type FallbackObserver = Arc<dyn Fn(&FallbackNotice) + Send + Sync>;

/// Models tried in order: when one fails with a retryable error
/// ([`ModelError::is_retryable`]: 429, 5xx, Anthropic's 529, timeouts, lost connections)
/// after its own retries, the turn goes to the next, and the answer's
/// [`Response::warnings`](crate::Response::warnings) say so (the agent shows them as warning
/// events; [`FallbackModel::with_observer`] hears of each move as it happens); any other error (a
/// refused request, a bad key) is returned at once, since the next model would be sent the
/// same request. Only failures before the answer starts move on: once deltas were yielded
/// the caller has seen them, and a broken stream is its error.
#[derive(Clone)]
pub struct FallbackModel {
    models: Vec<DynModel>,
    observer: Option<FallbackObserver>,
}

impl std::fmt::Debug for FallbackModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<_> = self.models.iter().map(|m| m.name()).collect();
        f.debug_struct("FallbackModel")
            .field("models", &names)
            .finish()
    }
}

impl FallbackModel {
    /// The models, first tried first; at least one.
    pub fn new(models: Vec<DynModel>) -> Result<Self, ModelError> {
        if models.is_empty() {
            return Err(ModelError::InvalidConfig(
                "a fallback chain needs at least one model".into(),
            ));
        }
        Ok(Self {
            models,
            observer: None,
        })
    }

    /// Calls `observer` on each move to the next model.
    pub fn with_observer(mut self, observer: FallbackObserver) -> Self {
        self.observer = Some(observer);
        self
    }
}

#[async_trait]
impl Model for FallbackModel {
    fn name(&self) -> &str {
        self.models[0].name()
    }

    /// Whether every model takes images (the others would get notes in their place).
    fn accepts_images(&self) -> bool {
        self.models.iter().all(|m| m.accepts_images())
    }

    async fn generate(&self, request: Request) -> Result<ResponseStream, ModelError> {
        let (last, rest) = self.models.split_last().expect("at least one model");
        let mut moves = Vec::new();
        for (i, model) in rest.iter().enumerate() {
            match model.generate(request.clone()).await {
                Ok(stream) => return Ok(with_warnings(stream, moves)),
                Err(error) if error.is_retryable() => {
                    let notice = FallbackNotice {
                        from: model.name().to_string(),
                        to: self.models[i + 1].name().to_string(),
                        error: error.to_string(),
                    };
                    tracing::warn!(from = %notice.from, to = %notice.to, error = %notice.error,
                        "model failed, trying the next");
                    if let Some(observer) = &self.observer {
                        observer(&notice);
                    }
                    moves.push(notice.to_string());
                }
                Err(error) => return Err(error),
            }
        }
        Ok(with_warnings(last.generate(request).await?, moves))
    }
}
