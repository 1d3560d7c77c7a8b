//! The dependency's side: its phases and flaps, its capacity (and the
//! clairvoyant row's limit, set from it), sending a call to the model and
//! a call's end (answered, timed out, refused), delivered to its owner.

use super::*;

/// A flapping dependency's next edge.
#[derive(Default)]
pub(super) struct Flapping {
    /// When a dependency that flaps by request count comes back up, once
    /// that is armed.
    pub(super) at: Option<u64>,
    /// The generation of the edges of a dependency that flaps by time: a
    /// phase starts a new one, and an edge armed before it does nothing.
    pub(super) generation: u32,
}

pub(super) struct Job<'a> {
    pub(super) owner: Owner,
    pub(super) permit: Option<Permit<&'a Lim>>,
    pub(super) outcome: Outcome,
    pub(super) holds_worker: bool,
    pub(super) hung: bool,
}

impl<'a> World<'a> {
    pub(super) fn capacity_changed(&mut self) {
        if let Some(cell) = self.clairvoyant {
            let capacity = self.model.capacity(secs(self.now));
            let share = if capacity == 0 {
                0
            } else {
                rows::share(self.sc, capacity)
            };
            if cell.swap(share, Ordering::Relaxed) != share {
                for limiter in self.limiters {
                    limiter.update(|_| ());
                }
            }
        }
        if self.flapping.at.is_none() && !self.model.flaps_by_time() {
            if let Some(up) = self.model.flap_change_after(secs(self.now)) {
                // Round up, so that at `t` the model agrees it is time.
                let t = (up * NANOS as f64).ceil() as u64 + 1;
                self.flapping.at = Some(t);
                self.at(t.max(self.now), Event::FlapUp);
            }
        }
    }

    /// Refuse the jobs a dependency that went down drops from its queue.
    pub(super) fn refuse(&mut self, refused: Vec<u64>) {
        let after = nanos(self.sc.dependency.refuse_latency);
        for job in refused {
            if let Some(j) = self.jobs.get_mut(job) {
                j.outcome = Outcome::Overload;
                self.at(self.now + after, Event::Done(job));
            }
        }
    }

    /// A flapping dependency may have gone down or come up.
    pub(super) fn flap_edge(&mut self) {
        let refused = self.model.flap_tick(secs(self.now));
        self.refuse(refused);
        let started = self.model.start_queued(secs(self.now));
        self.started(started);
        self.capacity_changed();
    }

    pub(super) fn arm_flap_edge(&mut self) {
        if self.model.flaps_by_time() {
            if let Some(next) = self.model.flap_change_after(secs(self.now)) {
                let t = (next * NANOS as f64).ceil() as u64 + 1;
                self.at(
                    t.max(self.now + 1),
                    Event::FlapEdge(self.flapping.generation),
                );
            }
        }
    }

    pub(super) fn phase(&mut self, i: usize) {
        let phase = &self.sc.dependency.phase[i];
        self.flapping.at = None;
        self.flapping.generation = self.flapping.generation.wrapping_add(1);
        let refused = self.model.apply(phase, secs(self.now));
        self.refuse(refused);
        let started = self.model.start_queued(secs(self.now));
        self.started(started);
        self.capacity_changed();
        self.arm_flap_edge();
    }

    // ----- interactive callers ---------------------------------------

    /// Send an attempt to the dependency, given `timeout` (ns): the job
    /// that carries it.
    pub(super) fn send(&mut self, owner: Owner, permit: Permit<&'a Lim>, timeout: u64) -> u64 {
        if self.in_window() {
            self.r.sent += 1;
            if permit.is_probe() {
                self.r.probes += 1;
                let second = self.second();
                if let Some(n) = self.r.probes_per_second.get_mut(second) {
                    *n += 1;
                }
            }
        }
        let job = self.jobs.insert(Job {
            owner,
            permit: Some(permit),
            outcome: Outcome::Overload,
            holds_worker: false,
            hung: false,
        });
        self.at(self.now + timeout, Event::Timeout(job));
        let accept = self.model.arrive(job, secs(self.now));
        let refused = matches!(accept, Accept::Refuse { .. });
        self.accepted(job, accept);
        if refused {
            // A dependency flapping by request count falls over at an
            // arrival: its return is due then, whether or not a call it
            // served is still running to notice.
            self.capacity_changed();
        }
        job
    }

    /// The caller gave up on job `job` (a hedge's race was decided): its
    /// permit goes back as ignored, teaching the policy nothing. The
    /// dependency is not told, as a server is not told of a client that
    /// hangs up: the call keeps its worker (or its place in the queue)
    /// until it would have finished, and only its answer is dropped.
    pub(super) fn cancel(&mut self, job: u64) {
        let Some(j) = self.jobs.get_mut(job) else {
            return;
        };
        if let Some(permit) = j.permit.take() {
            // Outrun by another attempt of its request: the time it ran
            // still counts in what the limiter learns of latencies.
            permit.outrun();
        }
        if j.hung {
            // A hung call holds nothing and never ends: nothing is left.
            self.jobs.remove(job);
        }
    }

    pub(super) fn accepted(&mut self, job: u64, accept: Accept) {
        let Some(j) = self.jobs.get_mut(job) else {
            return;
        };
        match accept {
            Accept::Serve { after, outcome } => {
                j.holds_worker = true;
                j.outcome = outcome;
                self.at(self.now + nanos(after), Event::Done(job));
            }
            Accept::Queued => {}
            Accept::Refuse { after } => {
                j.outcome = Outcome::Overload;
                self.at(self.now + nanos(after), Event::Done(job));
            }
            Accept::Hang => j.hung = true,
        }
    }

    pub(super) fn started(&mut self, started: Vec<(u64, Accept)>) {
        for (job, accept) in started {
            self.accepted(job, accept);
        }
    }

    pub(super) fn done(&mut self, job: u64) {
        let Some(mut j) = self.jobs.remove(job) else {
            return;
        };
        if j.holds_worker {
            let started = self.model.finish(secs(self.now));
            self.started(started);
            self.capacity_changed();
        }
        if let Some(permit) = j.permit.take() {
            permit.record(j.outcome);
            self.deliver(job, j.owner, Ended::Answered(j.outcome));
        }
    }

    pub(super) fn timeout(&mut self, job: u64) {
        let Some(j) = self.jobs.get_mut(job) else {
            return;
        };
        let Some(permit) = j.permit.take() else {
            return;
        };
        let (owner, hung) = (j.owner, j.hung);
        if hung {
            self.jobs.remove(job);
        }
        permit.overload();
        if self.in_window() {
            self.r.timeouts += 1;
        }
        self.deliver(job, owner, Ended::TimedOut);
    }

    /// An attempt, sent as job `job`, ended.
    pub(super) fn deliver(&mut self, job: u64, owner: Owner, ended: Ended) {
        match owner {
            Owner::Request(req) => self.request_job_ended(req, job, ended),
            Owner::Item(c) => self.item_attempt_ended(c, ended),
            Owner::Probe => self.probe_in_flight = false,
        }
    }
}
