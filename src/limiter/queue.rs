//! The bounded queue of callers waiting for a slot.
//!
//! # Invariant
//!
//! A slot is never free while someone waits for it, and no slot handed to
//! a waiter is lost:
//!
//! - A releaser hands its freed slot straight to a waiter ([`WaitQueue::serve`]
//!   takes the slot on the waiter's behalf), and a waiter that leaves after
//!   being handed a slot gets it back from [`Place::leave`] to give back.
//! - The lost wake-up — a caller finds the limit reached, a slot frees, and
//!   only then does the caller join the queue — is closed by ordering:
//!   [`WaitQueue::join`] counts the caller in the queue's length *before* it
//!   looks for a slot again, and a releaser gives its slot back *before*
//!   [`WaitQueue::is_empty`] reads the length (both sequentially
//!   consistent). So either the releaser sees the caller and serves the
//!   queue, or the caller's second look sees the freed slot. The length
//!   counts every waiter in the queue and, for the moment of that second
//!   look, the caller joining; only this type changes it.
//!
//! Joining and serving hold the queue's lock: a waiter is served at most
//! once, and a releaser that sees a joining caller counted waits for the
//! lock, then finds the caller in the queue, or no longer counted, its
//! second look answered.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use super::permit::Ticket;
use crate::error::{RejectReason, Rejection};
use crate::priority::Class;
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

type Queue = VecDeque<(Option<Class>, Arc<Waiter>)>;

pub(super) struct WaitQueue {
    /// Each waiter with its class (`None` for a limiter without).
    queue: Mutex<Queue>,
    /// Waiters in the queue, and a caller joining while it looks again.
    len: AtomicUsize,
    order: QueueOrder,
    /// Whether waiters have classes: the most critical is served first.
    classed: bool,
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

    /// What it was handed, if anything, taken.
    fn take(&self) -> Option<Result<Ticket, Rejection>> {
        match std::mem::replace(&mut *self.lock(), WaitState::Taken) {
            WaitState::Done(result) => Some(result),
            _ => None,
        }
    }
}

/// What came of a caller asking to join the queue.
pub(super) enum Joined<'a> {
    /// The queue holds as many waiters as it may: the caller did not join.
    Full,
    /// Its second look answered, and the caller did not join: admitted, or
    /// refused for a reason other than a full limit.
    Answered(Result<Ticket, Rejection>),
    /// In the queue.
    Queued(Place<'a>),
}

/// A waiter's place in the queue.
pub(super) struct Place<'a> {
    queue: &'a WaitQueue,
    waiter: Arc<Waiter>,
}

impl WaitQueue {
    pub(super) fn new(order: QueueOrder, classed: bool) -> Self {
        WaitQueue {
            queue: Mutex::new(VecDeque::new()),
            len: AtomicUsize::new(0),
            order,
            classed,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether no one waits: read by every release, after it gave its slot
    /// back (see the invariant).
    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        crate::sync::seq_cst_point();
        self.len.load(Ordering::SeqCst) == 0
    }

    /// Join the queue as a caller of `class` that found the limit reached,
    /// unless the queue holds `max` waiters already. The caller is counted
    /// first, and then `look_again` looks for a slot once more, under the
    /// queue's lock (see the invariant): if it finds the limit reached
    /// still, the caller joins; otherwise its answer is the caller's.
    pub(super) fn join(
        &self,
        class: Option<Class>,
        max: usize,
        look_again: impl FnOnce() -> Result<Ticket, Rejection>,
    ) -> Joined<'_> {
        let waiter = Arc::new(Waiter {
            state: Mutex::new(WaitState::Waiting(None)),
        });
        let mut queue = self.lock();
        if queue.len() >= max {
            return Joined::Full;
        }
        self.len.fetch_add(1, Ordering::SeqCst);
        crate::sync::seq_cst_point();
        match look_again() {
            Err(rejection) if rejection.reason() == RejectReason::LimitReached => {
                queue.push_back((class, Arc::clone(&waiter)));
                Joined::Queued(Place {
                    queue: self,
                    waiter,
                })
            }
            answer => {
                self.len.fetch_sub(1, Ordering::SeqCst);
                Joined::Answered(answer)
            }
        }
    }

    /// Hand slots to waiters, in queue order (the most critical class
    /// first, in queue order within it), while `admit` grants them, told
    /// each waiter's class. A shut gate refuses every waiter at once:
    /// waiting on an open breaker only holds the caller's worker.
    pub(super) fn serve(&self, mut admit: impl FnMut(Option<Class>) -> Result<Ticket, Rejection>) {
        let mut queue = self.lock();
        while let Some(at) = self.next(&queue) {
            let (class, waiter) = (queue[at].0, Arc::clone(&queue[at].1));
            match admit(class) {
                Ok(ticket) => {
                    self.pop(&mut queue, at);
                    waiter.complete(Ok(ticket));
                }
                // The most critical waiter cannot have a slot: no one can.
                Err(rejection) if rejection.reason() == RejectReason::LimitReached => break,
                Err(rejection) => {
                    self.pop(&mut queue, at);
                    waiter.complete(Err(rejection));
                }
            }
        }
    }

    /// Where the next waiter to serve stands.
    fn next(&self, queue: &Queue) -> Option<usize> {
        if queue.is_empty() {
            return None;
        }
        if !self.classed {
            return Some(match self.order {
                QueueOrder::Fifo => 0,
                QueueOrder::Lifo => queue.len() - 1,
            });
        }
        let top = queue.iter().map(|(class, _)| *class).min()?;
        let mut of_top = queue
            .iter()
            .enumerate()
            .filter(|(_, (class, _))| *class == top)
            .map(|(at, _)| at);
        match self.order {
            QueueOrder::Fifo => of_top.next(),
            QueueOrder::Lifo => of_top.next_back(),
        }
    }

    fn pop(&self, queue: &mut Queue, at: usize) {
        queue.remove(at);
        self.len.fetch_sub(1, Ordering::SeqCst);
    }

    /// Take `waiter` out of the queue if it is still there.
    fn remove(&self, waiter: &Arc<Waiter>) {
        let mut queue = self.lock();
        if let Some(at) = queue.iter().position(|(_, w)| Arc::ptr_eq(w, waiter)) {
            queue.remove(at);
            self.len.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Place<'_> {
    /// Resolves when the waiter has been handed a slot or refused.
    pub(super) fn granted(&self) -> impl Future<Output = Result<Ticket, Rejection>> + '_ {
        Wait {
            waiter: &self.waiter,
        }
    }

    /// Leave the queue; what the waiter was handed in the meantime, if
    /// anything, is returned (a slot to use or to give back).
    pub(super) fn leave(&self) -> Option<Result<Ticket, Rejection>> {
        self.queue.remove(&self.waiter);
        self.waiter.take()
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
