//! The client side of an attempt: acquiring from the instance's limiter
//! (at once, or waiting in its queue), and what follows an attempt's end —
//! the scenario's retries under the callers' budget, or the limiter's own
//! retry (`rheostat::retry::Attempts`, driven here as a front end does).

use super::*;

/// A caller's wait for a slot in its limiter's queue.
pub(super) type Waiting<'a> =
    Pin<Box<dyn Future<Output = Result<Permit<&'a Lim>, Rejection>> + 'a>>;

/// Wakes a waiting caller: notes its request, to be polled after the event
/// at hand.
pub(super) struct Woken {
    pub(super) req: u64,
    pub(super) woken: Arc<Mutex<Vec<u64>>>,
}

impl Wake for Woken {
    fn wake(self: Arc<Self>) {
        if let Ok(mut woken) = self.woken.lock() {
            woken.push(self.req);
        }
    }
}

impl<'a> World<'a> {
    pub(super) fn attempt(&mut self, req: u64) {
        let Some(traffic) = &self.sc.traffic else {
            return;
        };
        let Some(request) = self.requests.get_mut(req) else {
            return;
        };
        request.attempts += 1;
        if let Some(retry) = request.retry.as_mut().filter(|_| request.attempts > 1) {
            // A retry's backoff is over. The slot the limiter's retry asks
            // for ([`Action::Acquire`]) is taken below, as the scenario's
            // callers take theirs.
            let _acquire = retry.backoff_elapsed();
        }
        let after_refusal = request.refused.take().is_some();
        let (instance, deadline, attempts) = (request.instance, request.deadline, request.attempts);
        let class = request.class;
        if let Some(stats) = self.r.retry.as_mut() {
            stats.most_attempts = stats.most_attempts.max(attempts);
            stats.after_refusal += u64::from(after_refusal);
        }
        let s = self.second();
        if let Some(slot) = self.r.per_second.tried.get_mut(s) {
            *slot += 1;
        }
        if self.in_window() {
            self.r.tried += 1;
        }
        let limiters: &'a [Lim] = self.limiters;
        let limiter = &limiters[instance as usize];
        let as_class = class.and_then(|c| self.admit_as.get(usize::from(c)).copied());
        let admission = limiter.admission().class(as_class);
        let acquired = match traffic.wait {
            None => admission.try_acquire(),
            Some(wait) => {
                let future: Waiting<'a> = Box::pin(admission.acquire());
                let waker = Waker::from(Arc::new(Woken {
                    req,
                    woken: Arc::clone(&self.woken),
                }));
                let mut future = future;
                match future.as_mut().poll(&mut Context::from_waker(&waker)) {
                    Poll::Ready(result) => result,
                    Poll::Pending => {
                        self.waits.insert(req, (future, waker));
                        let patience = wait.max_wait.map_or(u64::MAX, nanos);
                        let until = deadline.min(self.now.saturating_add(patience));
                        self.at(until.max(self.now), Event::WaitOver(req));
                        return;
                    }
                }
            }
        };
        self.acquired(req, acquired);
    }

    /// A caller waiting in the limiter's queue was handed a slot or refused.
    pub(super) fn poll_woken(&mut self) {
        loop {
            let woken = match self.woken.lock() {
                Ok(mut woken) => std::mem::take(&mut *woken),
                Err(_) => return,
            };
            if woken.is_empty() {
                return;
            }
            for req in woken {
                let Some((future, waker)) = self.waits.get_mut(&req) else {
                    continue;
                };
                if let Poll::Ready(result) = future.as_mut().poll(&mut Context::from_waker(waker)) {
                    self.waits.remove(&req);
                    self.acquired(req, result);
                }
            }
        }
    }

    /// A caller gave up waiting in the limiter's queue: a refusal, whose
    /// cost it has paid waiting.
    pub(super) fn wait_over(&mut self, req: u64) {
        // Leaving the queue gives back a slot handed over meanwhile.
        if self.waits.remove(&req).is_none() {
            return;
        }
        let Some(request) = self.requests.get_mut(req) else {
            return;
        };
        request.refused = Some(RejectReason::TimedOut);
        let class = request.class;
        if self.in_window() {
            self.r.rejected += 1;
            if let Some(c) = class {
                self.r.classes[usize::from(c)].rejected += 1;
            }
        }
        self.request_attempt_ended(req, Ended::Refused);
    }

    /// An attempt of `req` was admitted or refused by its limiter.
    pub(super) fn acquired(&mut self, req: u64, acquired: Result<Permit<&'a Lim>, Rejection>) {
        let Some(traffic) = &self.sc.traffic else {
            return;
        };
        let Some(request) = self.requests.get_mut(req) else {
            return;
        };
        let (deadline, class) = (request.deadline, request.class);
        let instance = request.instance as usize;
        let s = self.second();
        match acquired {
            Err(rejection) => {
                if self.in_window() {
                    self.r.rejected += 1;
                    if let Some(c) = class {
                        self.r.classes[usize::from(c)].rejected += 1;
                    }
                }
                if let Some(request) = self.requests.get_mut(req) {
                    request.refused = Some(rejection.reason());
                }
                self.at(self.now + nanos(traffic.reject_cost), Event::Refused(req));
            }
            Ok(permit) => {
                if let Some(slot) = self.r.per_second.admitted.get_mut(s) {
                    *slot += 1;
                }
                let limiters: &'a [Lim] = self.limiters;
                let attempts = self.requests.get_mut(req).and_then(|r| r.retry.as_mut());
                if let (Some(retry), Some(attempts)) = (limiters[instance].retry(), attempts) {
                    // The limiter's retry gives the attempt its timeout,
                    // cut at the request's deadline (a probe's own, whole),
                    // or sends none with no time left.
                    let (timeout, probe) =
                        (permit.timeout(attempts.next_timeout()), permit.is_probe());
                    let clock = &self.clock;
                    match attempts.admitted(retry, || clock.now(), timeout, probe) {
                        Action::Send { timeout } => {
                            let sent = permit.started();
                            let job = self.send(Owner::Request(req), permit, nanos(timeout));
                            self.arm_hedge(req, job, sent);
                        }
                        // `Action::Expire`, the other answer to an admission.
                        _ => {
                            permit.ignore();
                            if self.in_window() {
                                self.r.failed += 1;
                            }
                            self.end_request(req);
                        }
                    }
                    return;
                }
                let ordinary = nanos(traffic.timeout).min(deadline.saturating_sub(self.now));
                // A probe gets the policy's probe timeout (`Permit::timeout`),
                // past the ordinary request's deadline: a cold dependency
                // answers slowly. The classic breaker's callers do not.
                let timeout = if self.probe_aware {
                    nanos(permit.timeout(Duration::from_nanos(ordinary)))
                } else {
                    ordinary
                }
                .max(1);
                self.send(Owner::Request(req), permit, timeout);
            }
        }
    }

    pub(super) fn request_attempt_ended(&mut self, req: u64, ended: Ended) {
        let Some(traffic) = &self.sc.traffic else {
            return;
        };
        if self.limiter_retry && ended != Ended::Answered(Outcome::Success) {
            self.limiter_retry_after(req, ended);
            return;
        }
        match ended {
            Ended::Answered(Outcome::Success) => self.answered(req),
            Ended::Answered(Outcome::Ignore) => {
                if self.in_window() {
                    self.r.client_errors += 1;
                }
                self.end_request(req);
            }
            Ended::Answered(Outcome::Overload) | Ended::TimedOut | Ended::Refused => {
                let Some(request) = self.requests.get_mut(req) else {
                    return;
                };
                let retry_at = self.now + nanos(traffic.backoff);
                let retryable = ended != Ended::Refused || traffic.retry_rejected;
                let (attempts, deadline, instance) =
                    (request.attempts, request.deadline, request.instance);
                if retryable
                    && attempts < traffic.attempts.0
                    && retry_at < deadline
                    && self.budgets[instance as usize].withdraw(self.now)
                {
                    self.at(retry_at, Event::Retry(req));
                } else {
                    if self.in_window() {
                        self.r.failed += 1;
                    }
                    self.end_request(req);
                }
            }
        }
    }

    /// `req` is answered successfully: its latency is the caller's, from
    /// its arrival.
    fn answered(&mut self, req: u64) {
        let (arrived, class) = self
            .requests
            .get_mut(req)
            .map_or((self.now, None), |r| (r.arrived, r.class));
        self.success(Some(self.now - arrived));
        self.class_success(class, self.now - arrived);
        self.end_request(req);
    }

    /// The attempt of `req` sent as job `job` ended: in the request's
    /// race, if it has one (the limiter's retry hedges), else as any
    /// attempt.
    pub(super) fn request_job_ended(&mut self, req: u64, job: u64, ended: Ended) {
        let raced = self
            .requests
            .get_mut(req)
            .and_then(|r| r.race.as_mut())
            .and_then(|race| {
                let i = race.out.iter().position(|&(j, _)| j == job)?;
                Some(race.out.swap_remove(i).1)
            });
        match raced {
            Some(hedge) => self.race_attempt_ended(req, hedge, ended),
            None => self.request_attempt_ended(req, ended),
        }
    }

    /// The attempt just sent for `req` (job `job`) may have hedges sent
    /// beside it: if the limiter's retry says how long to let it run
    /// first ([`Attempts::hedge_delay`]), a race begins and its timer is
    /// armed, as `Limiter::call` does after [`Action::Send`].
    fn arm_hedge(&mut self, req: u64, job: u64, sent: Option<std::time::Instant>) {
        let limiters: &'a [Lim] = self.limiters;
        let Some(request) = self.requests.get_mut(req) else {
            return;
        };
        let limiter = &limiters[request.instance as usize];
        let (Some(retry), Some(attempts)) = (limiter.retry(), request.retry.as_ref()) else {
            return;
        };
        if retry.config().hedge.is_none() {
            return;
        }
        let Some(delay) = attempts.hedge_delay(retry, limiter.timeouts().hedge) else {
            return;
        };
        let delay = nanos(delay);
        request.race = Some(Race {
            out: vec![(job, false)],
            hedges: 0,
            hedge_in: Some(delay),
            setbacks: limiter.setbacks(),
            sent,
        });
        request.hedge_timer = request.hedge_timer.wrapping_add(1);
        let timer = request.hedge_timer;
        self.at(self.now + delay, Event::Hedge(req, timer));
    }

    /// The attempts of `req`'s race have run for the hedge delay without
    /// an answer (`timer`, the timer's generation, still the request's):
    /// weigh a hedge ([`Attempts::hedge`]) and, if the limiter has a free
    /// slot for it, send it beside them, never waiting in the queue.
    pub(super) fn hedge_due(&mut self, req: u64, timer: u32) {
        let in_window = self.in_window();
        let limiters: &'a [Lim] = self.limiters;
        let Some(request) = self.requests.get_mut(req) else {
            return;
        };
        if request.hedge_timer != timer {
            return;
        }
        let Some(race) = request.race.as_mut() else {
            return;
        };
        if race.hedge_in.take().is_none() {
            return;
        }
        let limiter = &limiters[request.instance as usize];
        let (Some(retry), Some(attempts)) = (limiter.retry(), request.retry.as_mut()) else {
            return;
        };
        let clock = &self.clock;
        let late = limiter.late(race.setbacks, race.sent);
        let outcome = match attempts.hedge(retry, clock.now(), late) {
            Hedging::Not(why) => why,
            Hedging::Later(why) => {
                // Weighed again after another delay, as `Limiter::call` does.
                race.hedge_in = attempts
                    .hedge_delay(retry, limiter.timeouts().hedge)
                    .map(nanos);
                if let Some(delay) = race.hedge_in {
                    request.hedge_timer = request.hedge_timer.wrapping_add(1);
                    let timer = request.hedge_timer;
                    self.at(self.now + delay, Event::Hedge(req, timer));
                }
                why
            }
            Hedging::Acquire => {
                // An attempt made, as the machine counts it, admitted or
                // refused; taken with the request's class, as its others.
                request.attempts += 1;
                let (attempts_made, class) = (request.attempts, request.class);
                let as_class = class.and_then(|c| self.admit_as.get(usize::from(c)).copied());
                let acquired = limiter.admission().class(as_class).try_acquire();
                if let Some(stats) = self.r.retry.as_mut() {
                    stats.most_attempts = stats.most_attempts.max(attempts_made);
                }
                let s = self.second();
                if let Some(slot) = self.r.per_second.tried.get_mut(s) {
                    *slot += 1;
                }
                if in_window {
                    self.r.tried += 1;
                }
                match acquired {
                    Err(_) => {
                        if in_window {
                            self.r.rejected += 1;
                            if let Some(c) = class {
                                self.r.classes[usize::from(c)].rejected += 1;
                            }
                        }
                        self.hedge_refused(req)
                    }
                    Ok(permit) => {
                        if let Some(slot) = self.r.per_second.admitted.get_mut(s) {
                            *slot += 1;
                        }
                        self.hedge_admitted(req, permit)
                    }
                }
            }
        };
        if let (Some(stats), true) = (self.r.retry.as_mut(), in_window) {
            stats.hedge(outcome, 1);
        }
    }

    /// The hedge of `req` found no free slot: not sent.
    fn hedge_refused(&mut self, req: u64) -> HedgeOutcome {
        match self.requests.get_mut(req).and_then(|r| r.retry.as_mut()) {
            Some(attempts) => attempts.hedge_refused(),
            None => HedgeOutcome::Refused,
        }
    }

    /// The hedge of `req` was admitted with `permit`: sent beside the
    /// race's attempts, unless the request's deadline leaves it no time;
    /// then the next hedge's timer is armed, if another may follow.
    fn hedge_admitted(&mut self, req: u64, permit: Permit<&'a Lim>) -> HedgeOutcome {
        let limiters: &'a [Lim] = self.limiters;
        let Some(request) = self.requests.get_mut(req) else {
            permit.ignore();
            return HedgeOutcome::Deadline;
        };
        let limiter = &limiters[request.instance as usize];
        let (Some(retry), Some(attempts)) = (limiter.retry(), request.retry.as_mut()) else {
            permit.ignore();
            return HedgeOutcome::Deadline;
        };
        let timeout = permit.timeout(attempts.next_timeout());
        let clock = &self.clock;
        let Action::Send { timeout } = attempts.hedge_admitted(retry, || clock.now(), timeout)
        else {
            // `Action::Expire`: no time left before the deadline.
            permit.ignore();
            return HedgeOutcome::Deadline;
        };
        let next = attempts
            .hedge_delay(retry, limiter.timeouts().hedge)
            .map(nanos);
        let sent = permit.started();
        let job = self.send(Owner::Request(req), permit, nanos(timeout));
        let Some(request) = self.requests.get_mut(req) else {
            return HedgeOutcome::Sent;
        };
        if let Some(race) = request.race.as_mut() {
            race.out.push((job, true));
            race.hedges += 1;
            race.hedge_in = next;
            race.setbacks = limiter.setbacks();
            race.sent = sent;
        }
        if let Some(delay) = next {
            request.hedge_timer = request.hedge_timer.wrapping_add(1);
            let timer = request.hedge_timer;
            self.at(self.now + delay, Event::Hedge(req, timer));
        }
        HedgeOutcome::Sent
    }

    /// An attempt of `req`'s race ended (`hedge`: whether it was a
    /// hedge). While others are out and it did not answer for the request,
    /// the request waits for them ([`Action::Await`]), its hedge timer
    /// started afresh as `Limiter::call`'s; otherwise the race is decided:
    /// the attempts still out are cancelled, each hedge sent counts as won
    /// (it gave the answer) or lost, and the request goes on as the
    /// limiter's retry says.
    fn race_attempt_ended(&mut self, req: u64, hedge: bool, ended: Ended) {
        let in_window = self.in_window();
        let limiters: &'a [Lim] = self.limiters;
        let Some(request) = self.requests.get_mut(req) else {
            return;
        };
        let limiter = &limiters[request.instance as usize];
        let (Some(retry), Some(attempts)) = (limiter.retry(), request.retry.as_mut()) else {
            request.race = None;
            self.request_attempt_ended(req, ended);
            return;
        };
        let shut = || matches!(limiter.ready().now(), Readiness::Shut { .. });
        let clock = &self.clock;
        let now = || clock.now();
        let action = match ended {
            Ended::Answered(outcome) => {
                attempts.ended(retry, retry::Ended::Ran(outcome.into()), now, shut)
            }
            // A sent attempt is never refused: this is a timeout's end.
            Ended::TimedOut | Ended::Refused => {
                attempts.ended(retry, retry::Ended::TimedOut, now, shut)
            }
        };
        if action == Action::Await {
            let delay = request.race.as_ref().and_then(|race| race.hedge_in);
            if let Some(delay) = delay {
                request.hedge_timer = request.hedge_timer.wrapping_add(1);
                let timer = request.hedge_timer;
                self.at(self.now + delay, Event::Hedge(req, timer));
            }
            return;
        }
        if let Some(race) = request.race.take() {
            let won = u64::from(hedge && matches!(action, Action::Answer { decided: None }));
            for (job, _) in race.out {
                self.cancel(job);
            }
            if let (Some(stats), true) = (self.r.retry.as_mut(), in_window) {
                stats.hedge(HedgeOutcome::Won, won);
                stats.hedge(HedgeOutcome::Lost, u64::from(race.hedges) - won);
            }
        }
        self.follow(req, ended, action);
    }

    /// An attempt of a request whose callers retry through the limiter
    /// failed, was refused, or was answered with a client error: the
    /// limiter's retry decides what follows, as in `Limiter::call`.
    pub(super) fn limiter_retry_after(&mut self, req: u64, ended: Ended) {
        let in_window = self.in_window();
        let limiters: &'a [Lim] = self.limiters;
        let Some(request) = self.requests.get_mut(req) else {
            return;
        };
        let limiter = &limiters[request.instance as usize];
        let (Some(retry), Some(attempts)) = (limiter.retry(), request.retry.as_mut()) else {
            // Unreachable: the row's limiters have a retry, and its requests
            // began a call. Should it happen, the request ends unanswered.
            if in_window {
                self.r.failed += 1;
            }
            self.end_request(req);
            return;
        };
        let shut = || matches!(limiter.ready().now(), Readiness::Shut { .. });
        let clock = &self.clock;
        let now = || clock.now();
        let action = match ended {
            Ended::Answered(outcome) => {
                attempts.ended(retry, retry::Ended::Ran(outcome.into()), now, shut)
            }
            Ended::TimedOut => attempts.ended(retry, retry::Ended::TimedOut, now, shut),
            Ended::Refused => {
                let reason = request.refused.unwrap_or(RejectReason::LimitReached);
                attempts.refused(retry, reason, now, shut)
            }
        };
        self.follow(req, ended, action);
    }

    /// Do what the limiter's retry answered after an attempt of `req`
    /// ended as `ended`: answer the request, or back off and retry.
    fn follow(&mut self, req: u64, ended: Ended, action: Action) {
        let in_window = self.in_window();
        let decided = match action {
            Action::Sleep { decided, .. } => Some(decided),
            Action::Answer { decided } => decided,
            _ => None,
        };
        if let (Some(stats), Some(decided), true) = (self.r.retry.as_mut(), decided, in_window) {
            if let Some(i) = RetryOutcome::ALL.iter().position(|&o| o == decided.outcome) {
                stats.decisions[i] += 1;
            }
        }
        match action {
            Action::Sleep { wait, .. } => {
                self.at(self.now + nanos(wait), Event::Retry(req));
                return;
            }
            // A success, which a race decides through the machine.
            Action::Answer { decided: None } if ended == Ended::Answered(Outcome::Success) => {
                self.answered(req);
                return;
            }
            _ => {}
        }
        // The call is answered; or, unreachable, a wait in the queue is
        // asked for, which the rows' retries never allow
        // (`rows::retry_config` leaves `wait_on_limit` off): either way
        // the request ends.
        if in_window {
            if ended == Ended::Answered(Outcome::Ignore) {
                self.r.client_errors += 1;
            } else {
                self.r.failed += 1;
            }
        }
        self.end_request(req);
    }
}
