//! Attempts: a call that keeps its slot across retries tells its policy of
//! each attempt as it ends (`Permit::record_attempt`).

use std::time::Duration;

use crate::algorithms::{Algorithm, Feedback, Outcome};
use crate::clock::Clock;
use crate::limiter::permit::Ticket;
use crate::limiter::Limiter;

impl<A: Algorithm, C: Clock> Limiter<A, C> {
    /// One attempt of a call ended with `outcome` and the call keeps its
    /// slot for another: the policy learns from the attempt, timed from
    /// the ticket's start, and the ticket's next attempt is timed from now.
    /// A probe's first attempt answers for the probe; the attempts after it
    /// are ordinary calls.
    pub(crate) fn attempt_ended(&self, ticket: &mut Ticket, outcome: Outcome) {
        let timed = ticket.start.is_some();
        let feedback = self.feedback();
        if feedback == Feedback::Nothing || (feedback == Feedback::Timed && !timed) {
            // The policy learns nothing from it (or it was admitted untimed
            // and the policy has come to need latency since).
            return;
        }
        let now = self.clock.now();
        let latency = ticket
            .start
            .map_or(Duration::ZERO, |start| now.saturating_duration_since(start));
        let transitions = self.learn(ticket, outcome, latency, now);
        ticket.next_attempt(now);
        self.report(transitions);
    }

    /// Time the ticket's next attempt from now (a retry starting after a
    /// backoff).
    pub(crate) fn restart(&self, ticket: &mut Ticket) {
        if ticket.start.is_some() {
            ticket.start = Some(self.clock.now());
        }
    }
}
