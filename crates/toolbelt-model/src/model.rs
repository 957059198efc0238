//! The [`Model`] trait: a request in, a stream of responses out.

use std::sync::Arc;

use async_trait::async_trait;
use futures::stream::BoxStream;

use crate::{ModelError, Request, Response};

/// The stream a model call yields: partial responses, then one final response.
pub type ResponseStream = BoxStream<'static, Result<Response, ModelError>>;

/// A chat model that can call tools.
///
/// Implementations yield, for a streaming request, partial responses and then exactly one
/// final response (see [`Response`]); for a non-streaming request only the final one. An
/// error ends the stream.
#[async_trait]
pub trait Model: Send + Sync {
    /// The model's name, as sent to the provider.
    fn name(&self) -> &str;

    /// Whether the model takes image parts ([`crate::ContentPart::ImageUrl`]). Callers send
    /// a text summary instead when it does not; a model that is sent images anyway gets a
    /// text note in place of each. Default: no.
    fn accepts_images(&self) -> bool {
        false
    }

    /// Starts generating. Errors that happen before the first byte (connection refused,
    /// error statuses after retries) are returned here; later ones arrive in the stream.
    async fn generate(&self, request: Request) -> Result<ResponseStream, ModelError>;
}

/// A shared, type-erased model.
pub type DynModel = Arc<dyn Model>;

#[async_trait]
impl<M: Model + ?Sized> Model for Arc<M> {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn accepts_images(&self) -> bool {
        (**self).accepts_images()
    }
    async fn generate(&self, request: Request) -> Result<ResponseStream, ModelError> {
        (**self).generate(request).await
    }
}
