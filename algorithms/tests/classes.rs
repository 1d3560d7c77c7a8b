//! The class rules over random histories: calls of random classes arrive,
//! are admitted, turned away or find the limit full, end, and wait in vain
//! beside free slots, under a limit that moves. After every event, the
//! slots a class must leave free never fall from one class to the next and
//! never count its own or a lower class, and no reserve passes the largest
//! limit it grew under; every growth adds at most a slot and every drain
//! stays at or above nothing. Apart, an admit fraction is spent from the
//! top: a class with arrivals never gets less than a less critical one, and
//! the fractions spend exactly the gate's.

use proptest::prelude::*;
use rheostat_algorithms::classes::{
    counted, decayed, decays, drained, ended, fraction, grown, grows, need, share, starved,
    turned_away, Kept, DECAY_AT, STEP,
};

/// What happens next to the classes.
#[derive(Clone, Debug)]
enum Event {
    /// A call of the class asks for a slot.
    Call(usize),
    /// A call of the class ends (if it holds one).
    End(usize),
    /// A waiter of the class times out.
    Starve(usize),
    /// The gate moves to a new limit.
    Limit(u32),
}

fn event(classes: usize) -> impl Strategy<Value = Event> {
    prop_oneof![
        6 => (0..classes).prop_map(Event::Call),
        4 => (0..classes).prop_map(Event::End),
        1 => (0..classes).prop_map(Event::Starve),
        1 => (1u32..40).prop_map(Event::Limit),
    ]
}

/// A limiter's classes as plain numbers, moved by the rules the way a
/// runtime moves them.
#[derive(Debug)]
struct Model {
    classes: Vec<Kept>,
    /// Calls in flight, of every class (the least critical's not counted
    /// in its `held`).
    in_flight: u32,
    limit: u32,
    /// The largest limit seen.
    largest: u32,
}

impl Model {
    fn keeping(&self) -> u32 {
        self.classes
            .iter()
            .enumerate()
            .filter(|(_, k)| k.share > 0 || k.reserve > 0)
            .fold(0, |bits, (h, _)| bits | 1 << h)
    }

    fn need(&self, c: usize) -> u32 {
        need(c, self.limit, self.keeping(), |h| {
            assert!(h < c, "class {c} read class {h}");
            self.classes[h]
        })
    }

    fn drain(&mut self, h: usize, by: u64) {
        let before = self.classes[h].reserve;
        if let Some(after) = drained(before, by) {
            assert!(after < before && before - after <= by);
            self.classes[h].reserve = after;
        } else {
            assert_eq!(before, 0);
        }
    }

    fn apply(&mut self, event: &Event) {
        let n = self.classes.len();
        match *event {
            Event::Call(c) => {
                let need = self.need(c);
                if need > 0 && self.in_flight.saturating_add(need) >= self.limit {
                    // Turned away for the classes above.
                    for h in 0..c {
                        let Kept { held, reserve, .. } = self.classes[h];
                        if let Some(by) = turned_away(held, reserve) {
                            self.drain(h, by);
                        }
                    }
                } else if self.in_flight < self.limit {
                    self.in_flight += 1;
                    if counted(c, n) {
                        self.classes[c].held += 1;
                    }
                } else {
                    let classes = &self.classes;
                    if grows(c, n, self.in_flight, |h| classes[h].held) {
                        let before = self.classes[c].reserve;
                        if let Some(after) = grown(before, self.limit) {
                            assert!(after > before && after - before <= STEP);
                            self.classes[c].reserve = after;
                        }
                    }
                }
            }
            Event::End(c) => {
                let counted_held: u32 = self.classes[..n - 1].iter().map(|k| k.held).sum();
                if counted(c, n) {
                    if self.classes[c].held > 0 {
                        self.in_flight -= 1;
                        self.classes[c].held -= 1;
                        let Kept { held, reserve, .. } = self.classes[c];
                        if let Some(by) = ended(held, reserve) {
                            self.drain(c, by);
                        }
                    }
                } else if self.in_flight > counted_held {
                    self.in_flight -= 1;
                }
            }
            Event::Starve(c) => {
                if self.in_flight < self.limit {
                    for h in 0..c {
                        let Kept { held, reserve, .. } = self.classes[h];
                        if let Some(by) = starved(held, reserve) {
                            self.drain(h, by);
                        }
                    }
                }
            }
            Event::Limit(limit) => {
                self.limit = limit;
                self.largest = self.largest.max(limit);
            }
        }
    }
}

fn shares(classes: usize) -> impl Strategy<Value = Vec<f64>> {
    // Shares summing to at most 1: each a part of what is left.
    prop::collection::vec(0.0f64..=1.0, classes).prop_map(|parts| {
        let mut left = 1.0;
        parts
            .into_iter()
            .map(|part| {
                let share = if part < 0.5 { 0.0 } else { part * left / 2.0 };
                left -= share;
                share
            })
            .collect()
    })
}

fn history() -> impl Strategy<Value = (Vec<f64>, u32, Vec<Event>)> {
    (2usize..=16).prop_flat_map(|classes| {
        (
            shares(classes),
            1u32..40,
            prop::collection::vec(event(classes), 0..400),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn over_any_history_a_class_never_leaves_more_free_than_a_class_below_it(
        (shares, limit, events) in history(),
    ) {
        let mut model = Model {
            classes: shares
                .iter()
                .map(|&s| Kept { share: share(s), ..Kept::default() })
                .collect(),
            in_flight: 0,
            limit,
            largest: limit,
        };
        for event in &events {
            model.apply(event);
            let n = model.classes.len();
            let needs: Vec<u32> = (0..n).map(|c| model.need(c)).collect();
            prop_assert_eq!(needs[0], 0, "the most critical class leaves nothing free");
            for pair in needs.windows(2) {
                prop_assert!(pair[0] <= pair[1], "{:?} after {:?}", needs, event);
            }
            // A bit for a class that keeps nothing changes nothing.
            for (c, &kept_free) in needs.iter().enumerate() {
                let every = need(c, model.limit, u32::MAX, |h| model.classes[h]);
                prop_assert_eq!(every, kept_free);
            }
            for (h, kept) in model.classes.iter().enumerate() {
                prop_assert!(
                    kept.reserve <= u64::from(model.largest) * STEP,
                    "class {} keeps {} past the largest limit {}",
                    h, kept.reserve, model.largest,
                );
            }
            prop_assert_eq!(model.classes[n - 1].reserve, 0, "nothing is kept for the least critical");
        }
    }

    #[test]
    fn what_a_class_leaves_free_never_depends_on_itself_or_the_classes_below(
        (shares, limit, events) in history(),
        c in 0usize..16,
        noise in prop::collection::vec((0u64..10_000, 0u32..100), 16),
    ) {
        let mut model = Model {
            classes: shares
                .iter()
                .map(|&s| Kept { share: share(s), ..Kept::default() })
                .collect(),
            in_flight: 0,
            limit,
            largest: limit,
        };
        for event in &events {
            model.apply(event);
        }
        let c = c % model.classes.len();
        let before = need(c, model.limit, u32::MAX, |h| model.classes[h]);
        // Change every class from `c` down at will.
        let mut changed = model.classes.clone();
        for (kept, &(reserve, held)) in changed[c..].iter_mut().zip(&noise) {
            kept.reserve = reserve;
            kept.held = held;
            kept.share = kept.share.wrapping_add(held);
        }
        prop_assert_eq!(need(c, model.limit, u32::MAX, |h| changed[h]), before);
    }

    #[test]
    fn a_growth_never_passes_the_limit_and_a_drain_never_passes_nothing(
        (reserve, limit) in (0u32..=u32::MAX >> 1).prop_flat_map(|limit| {
            let most = u64::from(limit) * STEP;
            // Anywhere, or within two slots of the limit's worth.
            let near = most.saturating_sub(2 * STEP)..=most + 2 * STEP;
            (prop_oneof![0u64..1 << 40, near], Just(limit))
        }),
        by in 0u64..1 << 40,
    ) {
        match grown(reserve, limit) {
            Some(after) => {
                prop_assert!(after > reserve && after - reserve <= STEP);
                prop_assert!(after <= u64::from(limit) * STEP);
            }
            None => prop_assert!(reserve >= u64::from(limit) * STEP),
        }
        match drained(reserve, by) {
            Some(after) => prop_assert_eq!(after, reserve.saturating_sub(by)),
            None => prop_assert_eq!(reserve, 0),
        }
    }

    #[test]
    fn a_reserve_within_the_limit_keeps_no_more_slots_than_the_limit(
        limit in 0u32..=u32::MAX >> 1,
        at in 0.0f64..=1.0,
        part in 0.0f64..=1.0,
        held in 0u32..1000,
    ) {
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "a part of the limit's worth of reserve, in [0, limit * STEP]"
        )]
        let reserve = (at * (u64::from(limit) * STEP) as f64) as u64;
        let kept = Kept { share: share(part), reserve, held };
        prop_assert!(kept.slots(limit) <= limit);
        prop_assert!(kept.unused(limit) <= kept.slots(limit));
    }

    #[test]
    fn an_admit_fraction_gives_no_class_with_arrivals_less_than_one_below_it(
        arrivals in prop::collection::vec(0u64..1_000_000, 1..=16),
        p in 0.0f64..=1.0,
    ) {
        let fractions: Vec<f64> =
            (0..arrivals.len()).map(|c| fraction(c, p, arrivals.iter().copied())).collect();
        for (c, f) in fractions.iter().enumerate() {
            prop_assert!((0.0..=1.0).contains(f), "class {} admitted {}", c, f);
        }
        for c in 0..arrivals.len() {
            for k in c + 1..arrivals.len() {
                if arrivals[c] > 0 && arrivals[k] > 0 {
                    prop_assert!(fractions[c] >= fractions[k], "{:?} for {:?}", fractions, arrivals);
                }
            }
        }
        // Spent from the top, the fractions spend the gate's: p of the calls.
        #[allow(clippy::cast_precision_loss, reason = "counts far below 2^53")]
        let (spent, total) = arrivals.iter().zip(&fractions).fold((0.0, 0.0), |(spent, total), (&n, f)| {
            (spent + n as f64 * f, total + n as f64)
        });
        prop_assert!((spent - p * total).abs() <= 1e-9 * total.max(1.0), "spent {} of {}", spent, p * total);
    }

    #[test]
    fn a_more_generous_gate_never_admits_a_class_less(
        arrivals in prop::collection::vec(0u64..1_000_000, 1..=16),
        p in 0.0f64..=1.0,
        q in 0.0f64..=1.0,
    ) {
        let (low, high) = if p <= q { (p, q) } else { (q, p) };
        for c in 0..arrivals.len() {
            let at_low = fraction(c, low, arrivals.iter().copied());
            let at_high = fraction(c, high, arrivals.iter().copied());
            prop_assert!(at_low <= at_high + 1e-12, "class {}: {} at {}, {} at {}", c, at_low, low, at_high, high);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn counted_arrivals_never_reach_the_decay_point_and_keep_their_order(
        classes in 1usize..=16,
        seen in prop::collection::vec(0usize..16, 0..40_000),
    ) {
        let mut counts = vec![0u64; classes];
        for c in seen.into_iter().map(|c| c % classes) {
            counts[c] += 1;
            if decays(counts[c]) {
                let before = counts.clone();
                for n in &mut counts {
                    *n = decayed(*n);
                }
                for a in 0..classes {
                    for b in 0..classes {
                        if before[a] >= before[b] {
                            prop_assert!(counts[a] >= counts[b]);
                        }
                    }
                }
            }
            prop_assert!(counts.iter().all(|&n| n < DECAY_AT));
        }
    }
}
