//! Attaching to many partitions at once. One after another, a consumer of a 1,000-partition
//! topic took 17 s to subscribe (a lookup and a subscribe round trip each, in turn) where the
//! C++ client took 1 s (issue 31); the broker answers them concurrently.

use std::collections::HashMap;
use std::future::Future;

use tokio::task::JoinSet;

/// Runs `futures` concurrently, each as its own task, and gives their outputs in the order
/// the futures came. Dropping the returned future aborts the tasks still running. A panic in
/// one of them is resumed here, after the others finished.
pub(crate) async fn in_order<F, T>(futures: impl IntoIterator<Item = F>) -> Vec<T>
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    // Each task is the future itself, told apart by its task id: wrapped in an `async` block
    // with its index, the future was laid out twice in the task (captured, then awaited).
    let mut set = JoinSet::new();
    let mut place = HashMap::new();
    for (i, f) in futures.into_iter().enumerate() {
        place.insert(set.spawn(f).id(), i);
    }
    let mut out: Vec<Option<T>> = (0..set.len()).map(|_| None).collect();
    let mut panicked = None;
    while let Some(joined) = set.join_next_with_id().await {
        match joined {
            Ok((id, value)) => out[place[&id]] = Some(value),
            // Not cancelled: only dropping the set aborts its tasks.
            Err(e) => panicked = panicked.or(e.try_into_panic().ok()),
        }
    }
    if let Some(panic) = panicked {
        std::panic::resume_unwind(panic);
    }
    out.into_iter().map(|v| v.expect("every task reported")).collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn outputs_come_in_the_order_of_the_futures_not_of_finishing() {
        let delays = [30u64, 10, 20, 0];
        let got = in_order(delays.map(|ms| async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            ms
        }))
        .await;
        assert_eq!(got, delays);
    }

    #[tokio::test]
    async fn they_run_at_once() {
        // Each waits until all have started: run one after another, they would never finish.
        let all = std::sync::Arc::new(tokio::sync::Barrier::new(8));
        let got = in_order((0..8).map(|i| {
            let all = all.clone();
            async move {
                all.wait().await;
                i
            }
        }))
        .await;
        assert_eq!(got, (0..8).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn nothing_in_nothing_out() {
        assert!(in_order(Vec::<std::future::Ready<u8>>::new()).await.is_empty());
    }
}
