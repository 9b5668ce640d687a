//! A future that always runs to its end: polled in place by whoever awaits
//! it, and moved onto a task of its own when dropped before it is done.
//!
//! A decision must never stop halfway (between an all-or-nothing charge and
//! the refund of a refused request, or between a charge and its stats)
//! because its client gave up or a server deadline passed. Spawning every
//! decision guarantees that too, but costs a task, its scheduling and a
//! wake-up per request; here only an abandoned decision pays for a task.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// See the module's documentation. The future is boxed, so moving it onto
/// a task copies a pointer, not the future.
pub struct Finish<F: Future + Send + 'static>
where
    F::Output: Send + 'static,
{
    fut: Option<Pin<Box<F>>>,
    /// Set while the future is polled: if its poll panics, it is not
    /// resumed on a task (the panic reaches the caller, as any other).
    polling: bool,
}

impl<F: Future + Send + 'static> Finish<F>
where
    F::Output: Send + 'static,
{
    pub fn new(fut: F) -> Self {
        Finish {
            fut: Some(Box::pin(fut)),
            polling: false,
        }
    }
}

impl<F: Future + Send + 'static> Future for Finish<F>
where
    F::Output: Send + 'static,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        let Some(fut) = this.fut.as_mut() else {
            panic!("Finish polled after it answered");
        };
        this.polling = true;
        let r = fut.as_mut().poll(cx);
        this.polling = false;
        if r.is_ready() {
            this.fut = None;
        }
        r
    }
}

impl<F: Future + Send + 'static> Drop for Finish<F>
where
    F::Output: Send + 'static,
{
    fn drop(&mut self) {
        if self.polling {
            return;
        }
        if let Some(fut) = self.fut.take() {
            // Outside a runtime (the service is gone) nothing can run it.
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(fut);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    #[tokio::test]
    async fn a_future_dropped_halfway_finishes_on_a_task() {
        let steps = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let s = steps.clone();
        let f = Finish::new(async move {
            s.fetch_add(1, Ordering::SeqCst);
            let _ = rx.await;
            s.fetch_add(1, Ordering::SeqCst);
        });
        // The caller gives up while the future waits.
        let gave_up = tokio::time::timeout(Duration::from_millis(20), f).await;
        assert!(gave_up.is_err());
        assert_eq!(steps.load(Ordering::SeqCst), 1);
        tx.send(()).unwrap();
        for _ in 0..100 {
            if steps.load(Ordering::SeqCst) == 2 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the abandoned future did not finish");
    }

    #[tokio::test]
    async fn a_future_that_ends_in_place_is_not_run_again() {
        let runs = Arc::new(AtomicUsize::new(0));
        let r = runs.clone();
        let answer = Finish::new(async move {
            r.fetch_add(1, Ordering::SeqCst);
            7
        })
        .await;
        assert_eq!(answer, 7);
        tokio::task::yield_now().await;
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }

    /// Pending at its first poll, panics at its second: counts its polls.
    struct PanicsAtSecondPoll(Arc<AtomicUsize>);

    impl Future for PanicsAtSecondPoll {
        type Output = ();
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            if self.0.fetch_add(1, Ordering::SeqCst) == 0 {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            panic!("in the decision");
        }
    }

    #[tokio::test]
    async fn a_panic_reaches_the_caller_and_is_not_resumed() {
        let polls = Arc::new(AtomicUsize::new(0));
        let f = Finish::new(PanicsAtSecondPoll(polls.clone()));
        let caught = tokio::spawn(f).await;
        assert!(caught.unwrap_err().is_panic());
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert_eq!(
            polls.load(Ordering::SeqCst),
            2,
            "polled again after its panic"
        );
    }
}
