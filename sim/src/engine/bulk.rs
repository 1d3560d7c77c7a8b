//! The bulk consumers: items arriving on a queue, each consumer taking
//! one, retrying it after its backoff and dead-lettering it after its
//! attempts.

use super::*;

/// The bulk side of a run: its consumers, the items waiting for one, and
/// the rate items arrive at.
pub(super) struct Backlog {
    pub(super) consumers: Vec<Consumer>,
    pub(super) items: VecDeque<Item>,
    pub(super) rate: f64,
}

#[derive(Default)]
pub(super) struct Consumer {
    pub(super) item: Option<Item>,
    pub(super) busy: bool,
    pub(super) idle: bool,
}

#[derive(Clone, Copy)]
pub(super) struct Item {
    pub(super) attempts: u32,
}

impl<'a> World<'a> {
    pub(super) fn item_arrival(&mut self) {
        self.backlog.items.push_back(Item { attempts: 0 });
        self.r.items_in += 1;
        let step = self.step();
        if let Some(slot) = self.r.items.get_mut(step) {
            *slot += 1;
        }
        if let Some(c) = self.backlog.consumers.iter().position(|c| c.idle) {
            self.backlog.consumers[c].idle = false;
            self.at(self.now, Event::Wake(c as u32));
        }
        let gap = exp(&mut self.arrivals, self.backlog.rate);
        self.at(self.now + gap, Event::ItemArrival);
    }

    pub(super) fn wake(&mut self, c: u32) {
        let Some(bulk) = &self.sc.bulk else { return };
        let pause = nanos(bulk.pause);
        let consumer = &mut self.backlog.consumers[c as usize];
        if consumer.busy {
            return;
        }
        if consumer.item.is_none() {
            match self.backlog.items.pop_front() {
                Some(item) => consumer.item = Some(item),
                None => {
                    consumer.idle = true;
                    return;
                }
            }
        }
        let limiter = &self.limiters[0];
        match limiter.ready().now() {
            Readiness::Shut { retry_after } => {
                let wait = retry_after.map_or(pause, nanos).max(1_000_000);
                self.at(self.now + wait, Event::Wake(c));
                return;
            }
            Readiness::Probing if bulk.active_probe => {
                if !self.probe_in_flight {
                    if let Ok(permit) = limiter.try_acquire() {
                        if permit.is_probe() {
                            self.probe_in_flight = true;
                            self.send(Owner::Probe, permit, nanos(bulk.timeout));
                        } else {
                            permit.ignore();
                        }
                    }
                }
                self.at(self.now + pause, Event::Wake(c));
                return;
            }
            Readiness::Probing | Readiness::Ready => {}
        }
        match limiter.try_acquire() {
            Err(_) => self.at(self.now + pause, Event::Wake(c)),
            Ok(permit) => {
                self.backlog.consumers[c as usize].busy = true;
                self.r.calls += 1;
                let s = self.second();
                if let Some(slot) = self.r.per_second.admitted.get_mut(s) {
                    *slot += 1;
                }
                if let Some(slot) = self.r.per_second.tried.get_mut(s) {
                    *slot += 1;
                }
                self.set_active(self.active + 1);
                self.send(Owner::Item(c), permit, nanos(bulk.timeout));
            }
        }
    }

    pub(super) fn item_attempt_ended(&mut self, c: u32, ended: Ended) {
        let Some(bulk) = &self.sc.bulk else { return };
        self.set_active(self.active.saturating_sub(1));
        let consumer = &mut self.backlog.consumers[c as usize];
        consumer.busy = false;
        let Some(item) = consumer.item.as_mut() else {
            return;
        };
        match ended {
            Ended::Answered(Outcome::Success | Outcome::Ignore) => {
                consumer.item = None;
                self.r.items_done += 1;
                self.success(None);
                self.at(self.now, Event::Wake(c));
            }
            Ended::Answered(Outcome::Overload) | Ended::TimedOut | Ended::Refused => {
                item.attempts += 1;
                if item.attempts >= bulk.attempts.0 {
                    consumer.item = None;
                    self.r.dead_lettered += 1;
                    self.at(self.now, Event::Wake(c));
                } else {
                    let i = (item.attempts as usize - 1).min(bulk.backoff.len() - 1);
                    let wait = nanos(bulk.backoff[i]);
                    self.at(self.now + wait, Event::Wake(c));
                }
            }
        }
    }
}
