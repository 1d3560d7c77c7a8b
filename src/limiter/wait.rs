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
use std::time::{Duration, Instant};

use crate::algorithms::Algorithm;
use crate::clock::Clock;
use crate::error::{RejectReason, Rejection};
use crate::limiter::permit::Ticket;
use crate::limiter::Limiter;
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

pub(crate) struct WaitQueue {
    /// Each waiter with its class (`None` for a limiter without).
    queue: Mutex<VecDeque<(Option<Class>, Arc<Waiter>)>>,
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
}

impl WaitQueue {
    pub(crate) fn new(order: QueueOrder, classed: bool) -> Self {
        WaitQueue {
            queue: Mutex::new(VecDeque::new()),
            len: AtomicUsize::new(0),
            order,
            classed,
        }
    }

    fn lock(&self) -> MutexGuard<'_, VecDeque<(Option<Class>, Arc<Waiter>)>> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        crate::sync::seq_cst_point();
        self.len.load(Ordering::SeqCst) == 0
    }

    /// Hand slots to waiters, in queue order (the most critical class
    /// first, in queue order within it), while `admit` grants them, told
    /// each waiter's class. A shut gate refuses every waiter at once:
    /// waiting on an open breaker only holds the caller's worker.
    pub(crate) fn serve(&self, mut admit: impl FnMut(Option<Class>) -> Result<Ticket, Rejection>) {
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
    fn next(&self, queue: &VecDeque<(Option<Class>, Arc<Waiter>)>) -> Option<usize> {
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

    fn pop(&self, queue: &mut VecDeque<(Option<Class>, Arc<Waiter>)>, at: usize) {
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
    /// Gives a slot back ([`Limiter::release_granted`]), chosen where the
    /// limiter's bounds hold.
    release: fn(&Limiter<A, C>, &Ticket),
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
        if let Some(Ok(ticket)) = self.take_late_grant() {
            (self.release)(self.limiter, &ticket);
        }
    }
}

impl<A: Algorithm, C: Clock> Limiter<A, C> {
    /// The class a call asking for `class` is admitted as: `class` (the
    /// last if past it), the default class if `None`; `None` for a limiter
    /// without classes.
    #[inline]
    pub(crate) fn class_of(&self, class: Option<Class>) -> Option<Class> {
        self.classes.as_ref().map(|classes| {
            Class(class.map_or(classes.default_class(), |class| classes.clamp(class)))
        })
    }

    /// Admit a call of `class` (as [`Limiter::class_of`] gives it) at `now`.
    pub(crate) fn admit_waiting(
        &self,
        now: Instant,
        draw: bool,
        class: Option<Class>,
    ) -> Result<Ticket, Rejection> {
        match class {
            Some(class) => self.admit_as(class.0, draw, Some(now)),
            None => self.admit(now, draw, false),
        }
    }

    /// `rejection`, of a call of `class` if it has one.
    fn classed(&self, rejection: Rejection, class: Option<Class>) -> Rejection {
        match class {
            Some(class) => rejection.with_class(class),
            None => rejection,
        }
    }

    /// A slot handed to a waiter that left without it goes back.
    pub(crate) fn release_granted(&self, ticket: &Ticket) {
        self.release_class(ticket);
        self.release_slot();
    }

    /// Admit a call asking for `class`, waiting in the queue at most
    /// `max_wait` (`None`: no limit) if the limit is reached.
    pub(crate) async fn wait_for_slot(
        &self,
        max_wait: Option<Duration>,
        class: Option<Class>,
    ) -> Result<Ticket, Rejection> {
        let class = self.class_of(class);
        let now = self.clock().now();
        let first = self.admit_waiting(now, true, class);
        match first {
            Ok(ticket) => return Ok(ticket),
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
                let rejection = self.classed(self.rejection(RejectReason::QueueFull), class);
                self.count_rejection(&rejection);
                return Err(rejection);
            }
            // Announce ourselves before re-checking (see the module docs).
            self.waiters.len.fetch_add(1, Ordering::SeqCst);
            crate::sync::seq_cst_point();
            match self.admit_waiting(self.clock().now(), false, class) {
                Ok(ticket) => {
                    self.waiters.len.fetch_sub(1, Ordering::SeqCst);
                    return Ok(ticket);
                }
                Err(rejection) if rejection.reason() != RejectReason::LimitReached => {
                    self.waiters.len.fetch_sub(1, Ordering::SeqCst);
                    drop(queue);
                    self.count_rejection(&rejection);
                    return Err(rejection);
                }
                Err(_) => queue.push_back((class, Arc::clone(&waiter))),
            }
        }

        let mut leave = Leave {
            limiter: self,
            waiter: &waiter,
            armed: true,
            release: Self::release_granted,
        };
        let wait = Wait { waiter: &waiter };
        let result = match deadline {
            None => wait.await,
            Some(deadline) => match tokio::time::timeout_at(deadline, wait).await {
                Ok(result) => result,
                Err(_elapsed) => match leave.take_late_grant() {
                    // Handed a slot just as the deadline passed: use it.
                    Some(result) => result,
                    None => {
                        self.starved(class);
                        Err(self.classed(self.rejection(RejectReason::TimedOut), class))
                    }
                },
            },
        };
        leave.armed = false;
        drop(leave);
        if let Err(rejection) = &result {
            self.count_rejection(rejection);
        }
        result
    }
}
