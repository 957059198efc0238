//! Paginated MCP lists (`tools/list`, `resources/list`, `prompts/list`, …): one loop for
//! all of them, bounded so that a server handing out cursors forever cannot keep a listing
//! (and the client's memory) growing without end.

use std::future::Future;

use rmcp::ServiceError;
use rmcp::model::{ErrorData, PaginatedRequestParams};

/// The most pages one listing reads before it gives up.
pub(crate) const MAX_PAGES: usize = 1_000;

/// Every item of a paginated list: asks `page` for the first page, then for each next
/// cursor, until the server gives none (or an empty one). A server still paging after
/// [`MAX_PAGES`] pages is an error, never an endless loop.
pub(crate) async fn all_pages<T, F, Fut>(mut page: F) -> Result<Vec<T>, ServiceError>
where
    F: FnMut(PaginatedRequestParams) -> Fut,
    Fut: Future<Output = Result<(Vec<T>, Option<String>), ServiceError>>,
{
    let mut all = Vec::new();
    let mut cursor = None;
    for _ in 0..MAX_PAGES {
        let (items, next) = page(PaginatedRequestParams::default().with_cursor(cursor)).await?;
        all.extend(items);
        match next {
            Some(next) if !next.is_empty() => cursor = Some(next),
            _ => return Ok(all),
        }
    }
    Err(ServiceError::McpError(ErrorData::internal_error(
        format!("the server kept paging past {MAX_PAGES} pages"),
        None,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn pages_are_read_until_the_cursor_ends() {
        let items = all_pages(|params| async move {
            let n: usize = params.cursor.as_deref().map_or(0, |c| c.parse().unwrap());
            let next = (n < 2).then(|| (n + 1).to_string());
            Ok((vec![n], next))
        })
        .await
        .unwrap();
        assert_eq!(items, [0, 1, 2]);
    }

    #[tokio::test]
    async fn a_server_that_pages_forever_is_an_error() {
        let err = all_pages(|_| async { Ok((vec![()], Some("again".to_string()))) })
            .await
            .unwrap_err();
        assert!(err.to_string().contains("kept paging"), "{err}");
    }
}
