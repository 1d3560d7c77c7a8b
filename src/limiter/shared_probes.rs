//! Probes a fleet shares: tokens granted from outside
//! ([`Builder::shared_probes`]), one spent by each probe admitted.
use std::time::Instant;

use super::*;

impl<A> Held<A> {
    /// Spend a probe token granted from outside, if one is left and has not
    /// lapsed at `now`.
    pub(super) fn take_probe_token(&mut self, now: Instant) -> bool {
        let (left, until) = &mut self.probe_tokens;
        if *left == 0 || until.is_some_and(|until| now >= until) {
            return false;
        }
        *left -= 1;
        true
    }
}

impl<A: Algorithm, C: Clock> Limiter<A, C> {
    /// Grant `count` probe tokens, replacing any left, usable until
    /// `until` (`None`: until spent): for a limiter built with
    /// [`Builder::shared_probes`], a probe is admitted only with one.
    /// A fleet's shared allowance, claimed by a task beside the limiter,
    /// reaches it here.
    pub fn grant_probes(&self, count: u32, until: Option<Instant>) {
        self.with_held(self.clock.now(), |held| held.probe_tokens = (count, until));
    }

    /// The probe tokens left and when they lapse (see
    /// [`Limiter::grant_probes`]).
    pub fn probe_tokens(&self) -> (u32, Option<Instant>) {
        self.lock().probe_tokens
    }
}
