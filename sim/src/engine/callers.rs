//! The callers: interactive requests arriving over the fleet's instances
//! (Poisson, in steps and ramps), each holding a worker of its instance's
//! finite pool, the healthy endpoint that shares that pool, the class a
//! request is drawn with, and a request's end.

use super::*;

/// The callers' worker pools, one per instance of the fleet.
pub(super) struct Pools {
    /// Workers in each pool.
    pub(super) size: u32,
    /// Busy workers, by instance.
    pub(super) busy: Vec<u32>,
    /// Busy workers over the fleet.
    pub(super) total: u64,
}

pub(super) struct Request {
    pub(super) instance: u32,
    /// Its class: an index into the scenario's `traffic.classes`.
    pub(super) class: Option<u8>,
    pub(super) arrived: u64,
    pub(super) deadline: u64,
    pub(super) attempts: u32,
    /// The request's attempts, where the limiter's retry decides.
    pub(super) retry: Option<Attempts>,
    /// Why the last attempt was refused, if it was.
    pub(super) refused: Option<RejectReason>,
    /// The attempts racing for the request's answer, where the limiter's
    /// retry hedges: from an attempt's sending until one answers for the
    /// request.
    pub(super) race: Option<Race>,
    /// The generation of the request's hedge timer: a timer armed for an
    /// earlier race, or before the last restart, finds another and does
    /// nothing.
    pub(super) hedge_timer: u32,
}

/// The attempts of one request out at once: the attempt sent, and the
/// hedges sent beside it (`rheostat::retry::Attempts::hedge`), as
/// `Limiter::call` races them.
pub(super) struct Race {
    /// The jobs still out, each marked whether it is a hedge.
    pub(super) out: Vec<(u64, bool)>,
    /// Hedges sent in this race.
    pub(super) hedges: u32,
    /// How long after the last of the race's events (its start, a hedge
    /// sent, an attempt that failed while others are out) a hedge is
    /// weighed; `None` once none may follow.
    pub(super) hedge_in: Option<u64>,
    /// The limiter's setbacks when the last attempt was sent (one since
    /// stands the hedges down), and when it was sent: what
    /// `Limiter::late` weighs.
    pub(super) setbacks: u64,
    pub(super) sent: Option<std::time::Instant>,
}

impl<'a> World<'a> {
    /// Draw the next arrival at the current rate. A change of rate draws
    /// afresh (arrivals are memoryless), and the old draw is dropped.
    pub(super) fn arm_arrival(&mut self) {
        self.arrival_gen = self.arrival_gen.wrapping_add(1);
        if self.rate > 0.0 && self.sc.traffic.is_some() {
            let gap = exp(&mut self.arrivals, self.rate);
            self.at(self.now + gap, Event::Arrival(self.arrival_gen));
        }
    }

    pub(super) fn set_rate(&mut self, rate: f64) {
        if rate != self.rate {
            self.rate = rate;
            self.arm_arrival();
        }
    }

    pub(super) fn rate_phase(&mut self, i: usize) {
        let Some(traffic) = &self.sc.traffic else {
            return;
        };
        let phase = traffic.phase[i];
        match phase.until {
            Some(until) => self.ramp = Some((self.now, nanos(until), self.rate, phase.rate.0)),
            None => {
                self.ramp = None;
                self.set_rate(phase.rate.0);
            }
        }
    }

    /// Take a worker of `instance`'s pool, if one is free.
    pub(super) fn take_worker(&mut self, instance: u32) -> bool {
        let busy = &mut self.pools.busy[instance as usize];
        if *busy >= self.pools.size {
            return false;
        }
        *busy += 1;
        let busy = *busy;
        self.pools.total += 1;
        if self.in_window() {
            self.r.pool_peak = self.r.pool_peak.max(busy);
        }
        true
    }

    pub(super) fn release_worker(&mut self, instance: u32) {
        let busy = &mut self.pools.busy[instance as usize];
        if *busy > 0 {
            *busy -= 1;
            self.pools.total -= 1;
        }
    }

    pub(super) fn arrival(&mut self) {
        self.arm_arrival();
        let Some(traffic) = &self.sc.traffic else {
            return;
        };
        let instance = self.next_instance;
        self.next_instance = (self.next_instance + 1) % traffic.instances.0;
        self.r.calls += 1;
        let step = self.step();
        if let Some(slot) = self.r.arrivals.get_mut(step) {
            *slot += 1;
        }
        if self.in_window() {
            self.r.offered += 1;
        }
        let class = self.draw_class();
        if let (Some(c), true) = (class, self.in_window()) {
            self.r.classes[usize::from(c)].offered += 1;
        }
        if !self.take_worker(instance) {
            if self.in_window() {
                self.r.pool_full += 1;
            }
            return;
        }
        // The limiter's retry counts the request in its budget; the
        // scenario's callers count it in theirs.
        let retry = match self.limiters[instance as usize].retry() {
            Some(retry) if self.limiter_retry => {
                Some(Attempts::new(retry, self.clock.now(), traffic.timeout))
            }
            _ => {
                self.budgets[instance as usize].deposit(self.now);
                None
            }
        };
        let req = self.requests.insert(Request {
            instance,
            class,
            arrived: self.now,
            deadline: self.now + nanos(traffic.deadline),
            attempts: 0,
            retry,
            refused: None,
            race: None,
            hedge_timer: 0,
        });
        self.set_active(self.active + 1);
        self.attempt(req);
    }

    pub(super) fn healthy_arrival(&mut self) {
        let Some(traffic) = &self.sc.traffic else {
            return;
        };
        let instance = self.next_healthy;
        self.next_healthy = (self.next_healthy + 1) % traffic.instances.0;
        let gap = exp(&mut self.healthy, self.healthy_rate);
        self.at(self.now + gap, Event::HealthyArrival);
        let s = self.second();
        if let Some(slot) = self.r.per_second.healthy_offered.get_mut(s) {
            *slot += 1;
        }
        let counted = self.in_window();
        if counted {
            self.r.healthy_offered += 1;
        }
        if self.take_worker(instance) {
            let done = self.now + nanos(traffic.healthy.latency);
            self.at(done, Event::HealthyDone(instance));
        } else {
            if counted {
                self.r.healthy_turned_away += 1;
            }
            if let Some(slot) = self.r.per_second.healthy_turned_away.get_mut(s) {
                *slot += 1;
            }
        }
    }

    /// Draw an arriving request's class, if the scenario's traffic has
    /// classes.
    pub(super) fn draw_class(&mut self) -> Option<u8> {
        let classes = &self.sc.traffic.as_ref()?.classes;
        let last = classes.len().checked_sub(1)?;
        let u: f64 = self.class_draw.random();
        let mut sum = 0.0;
        let i = classes
            .iter()
            .position(|c| {
                sum += c.share.0;
                u < sum
            })
            .unwrap_or(last);
        u8::try_from(i).ok()
    }

    pub(super) fn end_request(&mut self, req: u64) {
        if let Some(request) = self.requests.remove(req) {
            if self.in_window() {
                if let Some(stats) = self.r.retry.as_mut() {
                    let i = request.attempts.max(1) as usize - 1;
                    if stats.attempts.len() <= i {
                        stats.attempts.resize(i + 1, 0);
                    }
                    stats.attempts[i] += 1;
                }
            }
            self.set_active(self.active.saturating_sub(1));
            self.release_worker(request.instance);
        }
    }

    // ----- bulk consumers ----------------------------------------------
}
