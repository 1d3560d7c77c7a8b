//! Waiting for a slot: a caller that finds the limit reached joins the
//! queue (`queue.rs`, where the argument that no wake-up is lost lives) and
//! waits there, at most its `max_wait`, to be handed a slot.

use std::time::{Duration, Instant};

use super::queue::{Joined, Place};
use crate::algorithms::Algorithm;
use crate::clock::Clock;
use crate::error::{RejectReason, Rejection};
use crate::limiter::permit::Ticket;
use crate::limiter::Limiter;
use crate::priority::Class;

/// Leaves the queue when the acquire future is dropped, and gives back a slot
/// handed over but never taken.
struct Leave<'a, A, C> {
    limiter: &'a Limiter<A, C>,
    place: &'a Place<'a>,
    armed: bool,
    /// Gives a slot back ([`Limiter::release_granted`]), chosen where the
    /// limiter's bounds hold.
    release: fn(&Limiter<A, C>, &Ticket),
}

impl<A, C> Drop for Leave<'_, A, C> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if let Some(Ok(ticket)) = self.place.leave() {
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
        // A wait that ends past the clock's range has no end.
        let deadline = max_wait.and_then(|d| tokio::time::Instant::now().checked_add(d));

        let look_again = || self.admit_waiting(self.clock().now(), false, class);
        let place = match self.waiters.join(class, self.max_waiters(), look_again) {
            Joined::Queued(place) => place,
            Joined::Answered(Ok(ticket)) => return Ok(ticket),
            Joined::Answered(Err(rejection)) => {
                self.count_rejection(&rejection);
                return Err(rejection);
            }
            Joined::Full => {
                let rejection = self.classed(self.rejection(RejectReason::QueueFull), class);
                self.count_rejection(&rejection);
                return Err(rejection);
            }
        };

        let mut leave = Leave {
            limiter: self,
            place: &place,
            armed: true,
            release: Self::release_granted,
        };
        let wait = place.granted();
        let result = match deadline {
            None => wait.await,
            Some(deadline) => match tokio::time::timeout_at(deadline, wait).await {
                Ok(result) => result,
                Err(_elapsed) => match place.leave() {
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
