//! The bounded queue of callers waiting for a slot.
//!
//! A releaser hands its freed slot straight to a waiter (it takes the slot on
//! the waiter's behalf), so a slot is never free while someone waits for it,
//! and a waiter that is cancelled after being handed a slot gives it back.
//!
//! The lost-wakeup race — a waiter finds the limit reached, a slot frees, and
//! only then does the waiter enqueue — is closed by ordering: a waiter raises
//! the queue's length *before* re-checking the limit, and a releaser lowers
//! in-flight *before* reading the length (both sequentially consistent). So
//! either the releaser sees the waiter, or the waiter's re-check sees the
//! freed slot.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::algorithms::Algorithm;
use crate::clock::Clock;
use crate::error::{RejectReason, Rejection};
use crate::limiter::permit::{Permit, Ticket};
use crate::limiter::Limiter;
use crate::sync::{Arc, AtomicUsize, Mutex, MutexGuard, Ordering, PoisonError};

/// The order in which waiters are served.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "config", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "config", serde(rename_all = "snake_case"))]
pub enum QueueOrder {
    /// Oldest first: fair.
    #[default]
    Fifo,
    /// Newest first: under sustained overload the newest caller, whose own
    /// deadline is furthest away, is served while the oldest time out — so
    /// the calls that do go are the ones still worth making.
    Lifo,
}

pub(crate) struct WaitQueue {
    queue: Mutex<VecDeque<Arc<Waiter>>>,
    len: AtomicUsize,
    order: QueueOrder,
}

struct Waiter {
    state: Mutex<WaitState>,
}

enum WaitState {
    Waiting(Option<Waker>),
    Done(Result<Ticket, Rejection>),
    Taken,
}

impl Waiter {
    fn lock(&self) -> MutexGuard<'_, WaitState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn complete(&self, result: Result<Ticket, Rejection>) {
        let previous = std::mem::replace(&mut *self.lock(), WaitState::Done(result));
        if let WaitState::Waiting(Some(waker)) = previous {
            waker.wake();
        }
    }
}

impl WaitQueue {
    pub(crate) fn new(order: QueueOrder) -> Self {
        WaitQueue {
            queue: Mutex::new(VecDeque::new()),
            len: AtomicUsize::new(0),
            order,
        }
    }

    fn lock(&self) -> MutexGuard<'_, VecDeque<Arc<Waiter>>> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        crate::sync::seq_cst_point();
        self.len.load(Ordering::SeqCst) == 0
    }

    /// Hand slots to waiters, in queue order, while `admit` grants them. A
    /// shut gate refuses every waiter at once: waiting on an open breaker
    /// only holds the caller's worker.
    pub(crate) fn serve(&self, mut admit: impl FnMut() -> Result<Ticket, Rejection>) {
        let mut queue = self.lock();
        loop {
            let next = match self.order {
                QueueOrder::Fifo => queue.front(),
                QueueOrder::Lifo => queue.back(),
            };
            let Some(waiter) = next.cloned() else { break };
            match admit() {
                Ok(ticket) => {
                    self.pop(&mut queue);
                    waiter.complete(Ok(ticket));
                }
                Err(rejection) if rejection.reason() == RejectReason::LimitReached => break,
                Err(rejection) => {
                    self.pop(&mut queue);
                    waiter.complete(Err(rejection));
                }
            }
        }
    }

    fn pop(&self, queue: &mut VecDeque<Arc<Waiter>>) {
        match self.order {
            QueueOrder::Fifo => queue.pop_front(),
            QueueOrder::Lifo => queue.pop_back(),
        };
        self.len.fetch_sub(1, Ordering::SeqCst);
    }

    /// Take `waiter` out of the queue if it is still there.
    fn remove(&self, waiter: &Arc<Waiter>) {
        let mut queue = self.lock();
        if let Some(at) = queue.iter().position(|w| Arc::ptr_eq(w, waiter)) {
            queue.remove(at);
            self.len.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl fmt::Debug for WaitQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WaitQueue")
            .field("len", &self.len.load(Ordering::Relaxed))
            .field("order", &self.order)
            .finish()
    }
}

/// Resolves when the waiter has been handed a slot or refused.
struct Wait<'a> {
    waiter: &'a Arc<Waiter>,
}

impl Future for Wait<'_> {
    type Output = Result<Ticket, Rejection>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.waiter.lock();
        match std::mem::replace(&mut *state, WaitState::Taken) {
            WaitState::Done(result) => Poll::Ready(result),
            WaitState::Waiting(_) => {
                *state = WaitState::Waiting(Some(cx.waker().clone()));
                Poll::Pending
            }
            WaitState::Taken => Poll::Pending,
        }
    }
}

/// Leaves the queue when the acquire future is dropped, and gives back a slot
/// handed over but never taken.
struct Leave<'a, A, C> {
    limiter: &'a Limiter<A, C>,
    waiter: &'a Arc<Waiter>,
    armed: bool,
    /// Gives a slot back ([`Limiter::release_slot`]), chosen where the
    /// limiter's bounds hold.
    release: fn(&Limiter<A, C>),
}

impl<A, C> Leave<'_, A, C> {
    /// Leave the queue; a slot handed over in the meantime is returned.
    fn take_late_grant(&self) -> Option<Result<Ticket, Rejection>> {
        self.limiter.waiters.remove(self.waiter);
        match std::mem::replace(&mut *self.waiter.lock(), WaitState::Taken) {
            WaitState::Done(result) => Some(result),
            _ => None,
        }
    }
}

impl<A, C> Drop for Leave<'_, A, C> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if let Some(Ok(_ticket)) = self.take_late_grant() {
            (self.release)(self.limiter);
        }
    }
}

impl<A: Algorithm, C: Clock> Limiter<A, C> {
    pub(crate) async fn wait_for_slot(
        &self,
        max_wait: Option<Duration>,
    ) -> Result<Permit<'_, A, C>, Rejection> {
        let now = self.clock().now();
        let first = self.admit(now, true, false);
        match first {
            Ok(ticket) => return Ok(Permit::new(self, ticket)),
            Err(rejection) if rejection.reason() != RejectReason::LimitReached => {
                self.count_rejection(&rejection);
                return Err(rejection);
            }
            Err(rejection) => {
                if max_wait.is_some_and(|d| d.is_zero()) {
                    self.count_rejection(&rejection);
                    return Err(rejection);
                }
            }
        }
        let deadline = max_wait.map(|d| {
            let now = tokio::time::Instant::now();
            now.checked_add(d)
                .unwrap_or_else(|| now + Duration::from_secs(86_400 * 365 * 30))
        });

        let waiter = Arc::new(Waiter {
            state: Mutex::new(WaitState::Waiting(None)),
        });
        {
            let mut queue = self.waiters.lock();
            if queue.len() >= self.max_waiters() {
                drop(queue);
                let rejection = self.rejection(RejectReason::QueueFull);
                self.count_rejection(&rejection);
                return Err(rejection);
            }
            // Announce ourselves before re-checking (see the module docs).
            self.waiters.len.fetch_add(1, Ordering::SeqCst);
            crate::sync::seq_cst_point();
            match self.admit(self.clock().now(), false, false) {
                Ok(ticket) => {
                    self.waiters.len.fetch_sub(1, Ordering::SeqCst);
                    return Ok(Permit::new(self, ticket));
                }
                Err(rejection) if rejection.reason() != RejectReason::LimitReached => {
                    self.waiters.len.fetch_sub(1, Ordering::SeqCst);
                    drop(queue);
                    self.count_rejection(&rejection);
                    return Err(rejection);
                }
                Err(_) => queue.push_back(Arc::clone(&waiter)),
            }
        }

        let mut leave = Leave {
            limiter: self,
            waiter: &waiter,
            armed: true,
            release: Self::release_slot,
        };
        let wait = Wait { waiter: &waiter };
        let result = match deadline {
            None => wait.await,
            Some(deadline) => match tokio::time::timeout_at(deadline, wait).await {
                Ok(result) => result,
                Err(_elapsed) => match leave.take_late_grant() {
                    // Handed a slot just as the deadline passed: use it.
                    Some(result) => result,
                    None => Err(self.rejection(RejectReason::TimedOut)),
                },
            },
        };
        leave.armed = false;
        drop(leave);
        match result {
            Ok(ticket) => Ok(Permit::new(self, ticket)),
            Err(rejection) => {
                self.count_rejection(&rejection);
                Err(rejection)
            }
        }
    }
}
