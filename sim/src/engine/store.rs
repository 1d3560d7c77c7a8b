//! A fleet's shared probe allowance, kept in a store
//! ([`SharedProbes`](crate::SharedProbes)): every `every`, each instance
//! asks [`ProbeClaims::due`] (the run's clock is the fleet's clock); a
//! claim due is counted against its cycle's counter at once and its grant
//! ([`ProbeAllowance::granted`](rheostat::limiter::ProbeAllowance::granted)) reaches
//! the instance `delay` later. An instance whose breaker closed after a
//! claim ([`ProbeClaims::recovered`]) marks the store recovered at once,
//! for [`ProbeAllowance::recovered_for`](rheostat::limiter::ProbeAllowance::recovered_for).

use std::time::Instant;

use rheostat::limiter::ProbeClaims;

use super::*;
use crate::SharedProbes;

/// The store and each instance's claims.
pub(super) struct Store {
    setup: SharedProbes,
    claims: Vec<ProbeClaims>,
    /// Probes claimed per cycle (what the store's counters hold).
    counters: BTreeMap<u64, u32>,
    /// Until when (ns) an instance's word that the dependency recovered
    /// stands.
    recovered_until: u64,
}

impl Store {
    pub(super) fn new(setup: SharedProbes, instances: u32) -> Store {
        Store {
            setup,
            claims: (0..instances)
                .map(|_| ProbeClaims::new(setup.allowance.cycle))
                .collect(),
            counters: BTreeMap::new(),
            recovered_until: 0,
        }
    }
}

impl World<'_> {
    /// Each instance's claimer asks whether a claim is due.
    pub(super) fn claim_round(&mut self) {
        let Some(store) = self.store.as_mut() else {
            return;
        };
        let since = Duration::from_nanos(self.now);
        let mut grants = Vec::new();
        let allowance = store.setup.allowance;
        for (i, limiter) in self.limiters.iter().enumerate() {
            if store.claims[i].recovered(limiter) {
                store.recovered_until = self.now + nanos(allowance.recovered_for());
            }
            let Some(claim) = store.claims[i].due(limiter, since) else {
                continue;
            };
            let recovered = self.now < store.recovered_until;
            let claimed = store.counters.entry(claim.cycle).or_default();
            let granted = allowance.granted(*claimed, recovered);
            *claimed = claimed.saturating_add(allowance.per_instance);
            grants.push((i as u32, granted, claim.lapse));
        }
        let (delay, every) = (nanos(store.setup.delay), nanos(store.setup.every));
        for (i, granted, lapse) in grants {
            self.at(self.now + delay, Event::Granted(i, granted, lapse));
        }
        self.at(self.now + every.max(1), Event::ClaimRound);
    }

    /// A claim's answer reaches instance `i`.
    pub(super) fn granted(&mut self, i: u32, granted: u32, lapse: Instant) {
        if let Some(limiter) = self.limiters.get(i as usize) {
            limiter.overrides().grant_probes(granted, Some(lapse));
        }
    }
}
