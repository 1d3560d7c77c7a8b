//! A live file against a hostile or careless writer: a FIFO in its place,
//! a reload that blocks, a file unchanged (not parsed again), a file
//! truncated and written in two chunks (never applied half written), and
//! one that never settles.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use rheostat::config::{LimitersConfig, LiveLimiters};

/// A fresh directory for one test's file.
fn dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rheostat-hostile-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn fixed(name: &str, limit: u32) -> String {
    format!("[limiters.{name}.policy]\npolicy = \"fixed\"\nlimit = {limit}\n")
}

/// Run `f` on a thread of its own and wait for its answer, failing if it
/// does not come within `within` (the thread is left behind).
fn within<T: Send + 'static>(within: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (sent, received) = mpsc::channel();
    thread::spawn(move || {
        let _ = sent.send(f());
    });
    received
        .recv_timeout(within)
        .expect("blocked: no answer in time")
}

#[cfg(unix)]
fn mkfifo(path: &Path) {
    let _ = std::fs::remove_file(path);
    let made = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(made.success());
}

#[cfg(unix)]
#[test]
fn a_fifo_in_place_of_the_live_file_is_refused_at_once_and_the_last_good_file_stays() {
    let path = dir("fifo").join("limits.toml");
    std::fs::write(&path, fixed("payments", 8)).unwrap();
    let live = Arc::new(LiveLimiters::load(&path).unwrap());
    let payments = live.get("payments").unwrap();
    mkfifo(&path);
    let e = within(Duration::from_secs(10), {
        let live = Arc::clone(&live);
        move || live.reload().unwrap_err()
    });
    assert!(
        e.reason().contains("found a FIFO, expected a regular file"),
        "{e}"
    );
    assert_eq!(e.file(), Some(path.as_path()));
    let e = within(Duration::from_secs(10), {
        let path = path.clone();
        move || LimitersConfig::load(&path).unwrap_err()
    });
    assert!(e.reason().contains("found a FIFO"), "{e}");
    assert_eq!((payments.gate().limit, live.version()), (8, 1));
    // A symbolic link to a regular file is followed.
    std::fs::remove_file(&path).unwrap();
    let target = path.with_file_name("real.toml");
    std::fs::write(&target, fixed("payments", 3)).unwrap();
    std::os::unix::fs::symlink(&target, &path).unwrap();
    assert!(live.reload().unwrap());
    assert_eq!(payments.gate().limit, 3);
}

#[cfg(unix)]
#[test]
fn a_fifo_in_place_of_the_live_file_stalls_no_task_on_a_current_thread_runtime() {
    let path = dir("fifo-watch").join("limits.toml");
    std::fs::write(&path, fixed("payments", 8)).unwrap();
    let live = Arc::new(LiveLimiters::load(&path).unwrap());
    mkfifo(&path);
    let ticks = within(Duration::from_secs(30), move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let watch = tokio::spawn(Arc::clone(&live).watch(Duration::from_millis(10)));
            // Another task on the same thread: it runs on while the watch
            // reloads every period.
            let mut ticks = 0;
            for _ in 0..30 {
                tokio::time::sleep(Duration::from_millis(10)).await;
                ticks += 1;
            }
            watch.abort();
            assert_eq!(live.get("payments").unwrap().gate().limit, 8);
            ticks
        })
    });
    assert_eq!(ticks, 30);
}

/// A hook given to each limiter a reload builds that, armed, stops the
/// reload until released.
#[derive(Default)]
struct Stop {
    phase: Mutex<(bool, bool)>,
    changed: Condvar,
    entered: AtomicBool,
}

impl Stop {
    fn arm(&self) {
        self.phase.lock().unwrap().0 = true;
    }

    fn stop_here(&self) {
        let mut phase = self.phase.lock().unwrap();
        if std::mem::take(&mut phase.0) {
            phase.1 = true;
            self.entered.store(true, Ordering::SeqCst);
            while phase.1 {
                phase = self.changed.wait(phase).unwrap();
            }
        }
    }

    fn release(&self) {
        self.phase.lock().unwrap().1 = false;
        self.changed.notify_all();
    }
}

#[test]
fn a_reload_that_blocks_stalls_no_task_on_a_current_thread_runtime() {
    let path = dir("blocking").join("limits.toml");
    std::fs::write(&path, fixed("payments", 8)).unwrap();
    let stop = Arc::new(Stop::default());
    let live = LiveLimiters::options(&path)
        .each({
            let stop = Arc::clone(&stop);
            move |builder| {
                stop.stop_here();
                builder
            }
        })
        .load()
        .unwrap();
    let live = Arc::new(live);
    // The next reload builds a limiter, and stops there as a file that
    // blocks its reader or takes a second to parse would.
    stop.arm();
    std::fs::write(&path, fixed("payments", 8) + &fixed("search", 2)).unwrap();
    struct Release(Arc<Stop>);
    impl Drop for Release {
        fn drop(&mut self) {
            self.0.release();
        }
    }
    let _release = Release(Arc::clone(&stop));
    let result = within(Duration::from_secs(30), {
        let stop = Arc::clone(&stop);
        move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let watch = tokio::spawn(Arc::clone(&live).watch(Duration::from_millis(10)));
                while !stop.entered.load(Ordering::SeqCst) {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                // The reload is stopped: this task still runs, many periods.
                for _ in 0..20 {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                stop.release();
                while live.get("search").is_none() {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                watch.abort();
                live.version()
            })
        }
    });
    assert_eq!(result, 2);
}

#[test]
fn an_unchanged_file_is_not_parsed_again_and_an_edit_always_is() {
    let path = dir("unchanged").join("limits.toml");
    std::fs::write(&path, fixed("payments", 8)).unwrap();
    let live = LiveLimiters::load(&path).unwrap();
    let payments = live.get("payments").unwrap();
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    metrics::with_local_recorder(&recorder, || {
        for _ in 0..3 {
            assert!(!live.reload().unwrap());
        }
        std::fs::write(&path, fixed("payments", 4)).unwrap();
        assert!(live.reload().unwrap());
        assert!(!live.reload().unwrap());
        // Quiet for 2 s: the file's stamp stands for its bytes, and is all
        // that is read; an edit of the same length changes the stamp.
        thread::sleep(Duration::from_millis(2_100));
        assert!(!live.reload().unwrap());
        std::fs::write(&path, fixed("payments", 5)).unwrap();
        assert!(live.reload().unwrap());
        assert_eq!(payments.gate().limit, 5);
        // A rewrite of the same bytes is not parsed again either.
        std::fs::write(&path, fixed("payments", 5)).unwrap();
        assert!(!live.reload().unwrap());
    });
    let text = recorder.handle().render();
    let file = path.display().to_string();
    let value = |result: &str| -> f64 {
        let series =
            format!("rheostat_config_reloads_total{{file=\"{file}\",result=\"{result}\"}}");
        text.lines()
            .find_map(|line| line.strip_prefix(series.as_str()))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {series} in\n{text}"))
    };
    // Parsed: the two edits. Not parsed: the six reloads of bytes in force.
    assert_eq!((value("applied"), value("unchanged")), (2.0, 6.0));
    assert_eq!(live.version(), 3);
}

#[test]
fn a_file_truncated_and_written_in_two_chunks_never_applies_half() {
    const ROUNDS: usize = 12;
    let path = dir("torn").join("limits.toml");
    std::fs::write(&path, fixed("payments", 100)).unwrap();
    let live = Arc::new(LiveLimiters::load(&path).unwrap());
    let payments = live.get("payments").unwrap();
    let done = Arc::new(AtomicBool::new(false));
    // Reloads as fast as they go, noting every limit in force.
    let reader = {
        let (live, done) = (Arc::clone(&live), Arc::clone(&done));
        thread::spawn(move || {
            let mut seen = Vec::new();
            while !done.load(Ordering::SeqCst) {
                let _ = live.reload();
                seen.push(payments.gate().limit);
            }
            seen
        })
    };
    // The file only ever says 100 or 200, but is truncated and written in
    // two chunks: `… limit = 1` (or 2), then `00`, 10 ms later.
    for round in 0..ROUNDS {
        let text = fixed("payments", if round % 2 == 0 { 200 } else { 100 });
        let (head, tail) = text.split_at(text.len() - 3);
        let mut file = std::fs::File::create(&path).unwrap();
        file.write_all(head.as_bytes()).unwrap();
        thread::sleep(Duration::from_millis(10));
        file.write_all(tail.as_bytes()).unwrap();
        drop(file);
        thread::sleep(Duration::from_millis(300));
    }
    done.store(true, Ordering::SeqCst);
    let seen = reader.join().unwrap();
    let half: Vec<u32> = seen
        .iter()
        .copied()
        .filter(|l| ![100, 200].contains(l))
        .collect();
    assert!(
        half.is_empty(),
        "half-written limits applied {} times, first {:?}",
        half.len(),
        &half[..half.len().min(5)]
    );
    assert!(seen.contains(&200), "no edit was applied");
}

#[test]
fn a_file_that_never_settles_is_refused_and_the_last_good_file_stays() {
    let path = dir("unsettled").join("limits.toml");
    std::fs::write(&path, fixed("payments", 8)).unwrap();
    let live = LiveLimiters::load(&path).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let (path, done) = (path.clone(), Arc::clone(&done));
        thread::spawn(move || {
            let mut limit = 100;
            while !done.load(Ordering::SeqCst) {
                std::fs::write(&path, fixed("payments", limit)).unwrap();
                limit += 1;
                thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let started = Instant::now();
    let e = live.reload().unwrap_err();
    let took = started.elapsed();
    done.store(true, Ordering::SeqCst);
    writer.join().unwrap();
    assert!(
        e.reason()
            .contains("write the file elsewhere and rename it into place"),
        "{e}"
    );
    assert_eq!(live.get("payments").unwrap().gate().limit, 8);
    println!("a file that never settles is refused after {took:?}");
}

/// A hostile file of 1 MiB (limiter tables each with a fault, to just
/// under the bound): the reload that parses it, and the reload of the
/// same bytes, which does not. Debug build: `cargo test -p rheostat
/// --test hostile_files -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement: prints figures, asserts nothing of time"]
fn a_hostile_mebibyte_measured() {
    let path = dir("mebibyte").join("limits.toml");
    std::fs::write(&path, fixed("payments", 8)).unwrap();
    let live = LiveLimiters::load(&path).unwrap();
    let mut text = String::new();
    let mut i = 0;
    while text.len() < rheostat::config::MAX_FILE_BYTES - 100 {
        text.push_str(&format!(
            "[limiters.l{i}]\nmax_wat = \"1s\"\npolicy = {{ policy = \"fixed\", limit = 1 }}\n"
        ));
        i += 1;
    }
    std::fs::write(&path, &text).unwrap();
    for reload in [
        "first (parsed)",
        "second (same bytes)",
        "third (same bytes)",
    ] {
        let started = Instant::now();
        assert!(live.reload().is_err());
        println!(
            "{reload} reload of a hostile 1 MiB file: {:?}",
            started.elapsed()
        );
    }
}
