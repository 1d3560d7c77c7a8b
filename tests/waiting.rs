//! Waiting for a slot: wake-ups, deadlines, queue order, a full queue, and
//! cancellation — all under Tokio's paused clock.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use rheostat::Admission;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rheostat::algorithms::{Algorithm, Fixed, Gate, Published, Sample};
use rheostat::{clock::TokioClock, limiter::QueueOrder, Limiter, RejectReason};

type Fixed1 = Arc<Limiter<Fixed, TokioClock>>;

fn limiter(limit: u32, order: QueueOrder, max_waiters: usize) -> Fixed1 {
    Arc::new(
        Limiter::builder(Fixed::new(limit).unwrap())
            .clock(TokioClock)
            .queue(order, max_waiters)
            .build()
            .unwrap(),
    )
}

/// Let every spawned task run until it blocks.
async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_waiter_is_woken_when_a_slot_frees() {
    let limiter = limiter(1, QueueOrder::Fifo, 8);
    let held = limiter.try_acquire().unwrap();
    let waiter = tokio::spawn(Admission::new(Arc::clone(&limiter)).acquire());
    settle().await;
    assert!(!waiter.is_finished());
    held.success();
    let permit = waiter.await.unwrap().unwrap();
    assert_eq!(limiter.in_flight(), 1);
    permit.success();
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_waiter_past_its_deadline_gets_a_timeout() {
    let limiter = limiter(1, QueueOrder::Fifo, 8);
    let _held = limiter.try_acquire().unwrap();
    let started = tokio::time::Instant::now();
    let refused = limiter
        .admission()
        .max_wait(Duration::from_millis(250))
        .acquire()
        .await
        .unwrap_err();
    assert_eq!(refused.reason(), RejectReason::TimedOut);
    assert_eq!(started.elapsed(), Duration::from_millis(250));
    // It left the queue: a freed slot is not handed to a ghost.
    drop(_held);
    assert_eq!(limiter.in_flight(), 0);
    assert!(limiter.try_acquire().is_ok());
}

#[tokio::test(start_paused = true)]
async fn the_configured_maximum_wait_applies_to_acquire() {
    let limiter = Arc::new(
        Limiter::builder(Fixed::new(1).unwrap())
            .clock(TokioClock)
            .max_wait(Duration::from_secs(2))
            .build()
            .unwrap(),
    );
    let _held = limiter.try_acquire().unwrap();
    let refused = limiter.admission().acquire().await.unwrap_err();
    assert_eq!(refused.reason(), RejectReason::TimedOut);
}

async fn serve_order(order: QueueOrder) -> Vec<usize> {
    let limiter = limiter(1, order, 8);
    let held = limiter.try_acquire().unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for id in 0..3 {
        let limiter = Arc::clone(&limiter);
        let tx = tx.clone();
        tokio::spawn(async move {
            let permit = Admission::new(limiter).acquire().await.unwrap();
            tx.send(id).unwrap();
            tokio::time::sleep(Duration::from_millis(10)).await;
            permit.success();
        });
        settle().await;
    }
    held.success();
    let mut served = Vec::new();
    for _ in 0..3 {
        served.push(rx.recv().await.unwrap());
    }
    served
}

#[tokio::test(start_paused = true)]
async fn fifo_serves_the_oldest_waiter_first() {
    assert_eq!(serve_order(QueueOrder::Fifo).await, vec![0, 1, 2]);
}

#[tokio::test(start_paused = true)]
async fn lifo_serves_the_newest_waiter_first() {
    assert_eq!(serve_order(QueueOrder::Lifo).await, vec![2, 1, 0]);
}

#[tokio::test(start_paused = true)]
async fn a_full_queue_rejects_at_once() {
    let limiter = limiter(1, QueueOrder::Fifo, 2);
    let _held = limiter.try_acquire().unwrap();
    let _w1 = tokio::spawn(Admission::new(Arc::clone(&limiter)).acquire());
    let _w2 = tokio::spawn(Admission::new(Arc::clone(&limiter)).acquire());
    settle().await;
    let started = tokio::time::Instant::now();
    let refused = limiter.admission().acquire().await.unwrap_err();
    assert_eq!(refused.reason(), RejectReason::QueueFull);
    assert_eq!(started.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn a_queue_of_zero_never_waits() {
    let limiter = limiter(1, QueueOrder::Fifo, 0);
    let _held = limiter.try_acquire().unwrap();
    assert_eq!(
        limiter.admission().acquire().await.unwrap_err().reason(),
        RejectReason::QueueFull
    );
}

#[tokio::test(start_paused = true)]
async fn a_dropped_acquire_leaves_the_queue_and_strands_no_one() {
    let limiter = limiter(1, QueueOrder::Fifo, 8);
    let held = limiter.try_acquire().unwrap();
    let first = tokio::spawn(Admission::new(Arc::clone(&limiter)).acquire());
    settle().await;
    let second = tokio::spawn(Admission::new(Arc::clone(&limiter)).acquire());
    settle().await;
    first.abort();
    assert!(first.await.unwrap_err().is_cancelled());
    held.success();
    let permit = second.await.unwrap().unwrap();
    assert_eq!(limiter.in_flight(), 1);
    permit.success();
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_slot_handed_to_a_cancelled_waiter_goes_back() {
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll};

    let limiter = limiter(1, QueueOrder::Fifo, 8);
    let held = limiter.try_acquire().unwrap();
    let mut cx = Context::from_waker(std::task::Waker::noop());
    {
        let mut waiting = pin!(limiter.admission().acquire());
        assert!(matches!(waiting.as_mut().poll(&mut cx), Poll::Pending));
        // The slot is handed over to the queued waiter ...
        held.success();
        assert_eq!(limiter.in_flight(), 1);
        // ... which is dropped before it looks.
    }
    assert_eq!(limiter.in_flight(), 0);
    assert!(limiter.try_acquire().is_ok());
}

#[tokio::test(start_paused = true)]
async fn a_dropped_permit_wakes_the_next_waiter() {
    let limiter = limiter(1, QueueOrder::Fifo, 8);
    let held = limiter.try_acquire().unwrap();
    let waiter = tokio::spawn(Admission::new(Arc::clone(&limiter)).acquire());
    settle().await;
    drop(held);
    assert!(waiter.await.unwrap().is_ok());
}

#[tokio::test(start_paused = true)]
async fn raising_the_limit_wakes_waiters() {
    let limiter = limiter(1, QueueOrder::Fifo, 8);
    let _held = limiter.try_acquire().unwrap();
    let waiter = tokio::spawn(Admission::new(Arc::clone(&limiter)).acquire());
    settle().await;
    limiter.update(|f| f.set_limit(2)).unwrap();
    assert!(waiter.await.unwrap().is_ok());
}

#[tokio::test(start_paused = true)]
async fn waiters_are_refused_at_once_when_the_gate_shuts() {
    #[derive(Default)]
    struct Switch(bool);
    impl Algorithm for Switch {
        fn name(&self) -> &'static str {
            "switch"
        }
        fn publish(&self) -> Published {
            Published::new(if self.0 {
                Gate::shut(None)
            } else {
                Gate::limited(1)
            })
        }
        fn on_sample(&mut self, _: Instant, _: &Sample) {}
    }
    let limiter = Arc::new(
        Limiter::builder(Switch::default())
            .clock(TokioClock)
            .build()
            .unwrap(),
    );
    let held = limiter.try_acquire().unwrap();
    let waiter = tokio::spawn(Admission::new(Arc::clone(&limiter)).acquire());
    settle().await;
    limiter.update(|s| s.0 = true);
    held.success();
    let refused = waiter.await.unwrap().unwrap_err();
    assert_eq!(refused.reason(), RejectReason::Open);
    assert_eq!(limiter.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn many_waiters_and_releases_conserve_slots() {
    let limiter = limiter(3, QueueOrder::Fifo, 1024);
    let mut tasks = Vec::new();
    for i in 0..200u64 {
        let limiter = Arc::clone(&limiter);
        tasks.push(tokio::spawn(async move {
            let wait = Duration::from_millis(5 + i % 40);
            match limiter.admission().max_wait(wait).acquire().await {
                Ok(permit) => {
                    assert!(limiter.in_flight() <= 3);
                    tokio::time::sleep(Duration::from_millis(1 + i % 7)).await;
                    permit.success();
                    true
                }
                Err(_) => false,
            }
        }));
    }
    let mut served = 0;
    for t in tasks {
        served += usize::from(t.await.unwrap());
    }
    assert!(served > 0);
    assert_eq!(limiter.in_flight(), 0);
    assert!(limiter.try_acquire().is_ok());
}

#[tokio::test(start_paused = true)]
async fn a_zero_wait_never_waits_and_a_maximal_one_waits_without_overflow() {
    let limiter = Limiter::new(Fixed::new(1).unwrap());
    let held = limiter
        .admission()
        .max_wait(Duration::ZERO)
        .acquire()
        .await
        .unwrap();
    let refused = limiter
        .admission()
        .max_wait(Duration::ZERO)
        .acquire()
        .await
        .unwrap_err();
    assert_eq!(refused.reason(), RejectReason::LimitReached);

    let waiting = limiter.admission().max_wait(Duration::MAX).acquire();
    let release = async {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        held.success();
    };
    let (waited, ()) = tokio::join!(waiting, release);
    let permit = waited.unwrap();
    assert_eq!(limiter.in_flight(), 1);
    permit.success();
    assert_eq!(limiter.in_flight(), 0);
}
