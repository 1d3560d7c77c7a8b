//! A scenario's report as a table for people: its columns, the two
//! layouts, and the prose under the table.

use std::fmt::Write as _;

use super::*;

impl ScenarioReport {
    /// The scenario as a table, one row per policy, in the
    /// [`Layout::Narrow`] layout: at most [`NARROW_WIDTH`] characters a
    /// line.
    ///
    /// # Examples
    ///
    /// ```
    /// use rheostat_sim::{compare, rows, Scenario, NARROW_WIDTH};
    ///
    /// let scenario = Scenario::from_toml("inline", r#"
    ///     name = "tiny"
    ///     duration = "30s"
    ///     [dependency]
    ///     workers = 10
    ///     service = { median = "50ms", p99 = "100ms" }
    ///     [traffic]
    ///     rate = 20
    ///     timeout = "1s"
    ///     deadline = "1s"
    /// "#)?;
    /// let (report, _stats) = compare(&[scenario], &rows::all(), 7, |_| {})?;
    /// let table = report.scenarios[0].table();
    /// assert!(table.lines().all(|line| line.chars().count() <= NARROW_WIDTH));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn table(&self) -> String {
        self.table_in(Layout::Narrow)
    }

    /// The scenario as a table, one row per policy, in `layout`.
    ///
    /// Every column is as wide as its header or its widest cell; headers
    /// are words, on two lines (`workers` over `held`). Above the table,
    /// the scenario, its bound and its callers' pool; under it, per row,
    /// what a column cannot hold: a row's own bound, its share served of
    /// each class, its latency against the healthy reference span, what
    /// its retry policy decided. The prose is wrapped at the table's width
    /// ([`NARROW_WIDTH`] at least).
    ///
    /// # Examples
    ///
    /// ```
    /// use rheostat_sim::{compare, rows, Layout, Scenario};
    ///
    /// let scenario = Scenario::from_toml("inline", r#"
    ///     name = "tiny"
    ///     duration = "30s"
    ///     [dependency]
    ///     workers = 10
    ///     service = { median = "50ms", p99 = "100ms" }
    ///     [traffic]
    ///     rate = 20
    ///     timeout = "1s"
    ///     deadline = "1s"
    /// "#)?;
    /// let (report, _stats) = compare(&[scenario], &[rows::aimd()], 7, |_| {})?;
    /// let wide = report.scenarios[0].table_in(Layout::Wide);
    /// assert!(wide.contains("dead"), "the wide table has every column");
    /// assert!(!report.scenarios[0].table().contains("dead"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn table_in(&self, layout: Layout) -> String {
        let cells: Vec<Vec<String>> = self
            .policies
            .iter()
            .map(|p| COLUMNS.iter().map(|c| (c.cell)(p)).collect())
            .collect();
        let name_width = self
            .policies
            .iter()
            .map(|p| p.policy.chars().count())
            .chain(["policy".len()])
            .max()
            .unwrap_or(0);
        // (index into COLUMNS, width)
        let mut shown: Vec<(usize, usize)> = COLUMNS
            .iter()
            .enumerate()
            .filter(|(_, c)| layout == Layout::Wide || c.narrow)
            .map(|(i, c)| {
                let widest = cells.iter().map(|row| row[i].chars().count()).max();
                let head = c.head.iter().map(|h| h.chars().count()).max();
                (i, widest.max(head).unwrap_or(0))
            })
            .collect();
        let line_width = |shown: &[(usize, usize)]| {
            name_width + shown.iter().map(|(_, w)| GAP.len() + w).sum::<usize>()
        };
        // Numbers past any shipped scenario's could still overflow: the
        // last columns make room, and the table says which.
        let mut left_out: Vec<String> = Vec::new();
        while layout == Layout::Narrow && line_width(&shown) > NARROW_WIDTH && shown.len() > 1 {
            if let Some((i, _)) = shown.pop() {
                left_out.insert(0, COLUMNS[i].head.join(" ").trim().to_string());
            }
        }
        let width = line_width(&shown).max(NARROW_WIDTH);

        let mut out = String::new();
        wrap_into(
            &mut out,
            &format!("{} — {}", self.name, self.about),
            width,
            0,
        );
        let b = &self.bound;
        wrap_into(
            &mut out,
            &format!(
                "bound: {:.1}/s ({:.0} successes: {:.0} fluid + {:.0} allowance)",
                b.goodput, b.successes, b.fluid, b.allowance
            ),
            width,
            2,
        );
        if let Some(pool) = self.pool {
            let mut line = format!("caller pool: {pool} workers per instance");
            if layout == Layout::Wide {
                let _ = write!(line, " (saturated where the pool peak reaches {pool})");
            }
            wrap_into(&mut out, &line, width, 2);
        }
        for line in 0..2 {
            let mut row = format!("{:<name_width$}", if line == 1 { "policy" } else { "" });
            for &(i, w) in &shown {
                let _ = write!(row, "{GAP}{:>w$}", COLUMNS[i].head[line]);
            }
            let _ = writeln!(out, "{}", row.trim_end());
        }
        for (p, row) in self.policies.iter().zip(&cells) {
            let mut line = format!("{:<name_width$}", p.policy);
            for &(i, w) in &shown {
                let _ = write!(line, "{GAP}{:>w$}", row[i]);
            }
            let _ = writeln!(out, "{line}");
        }
        if !left_out.is_empty() {
            wrap_into(
                &mut out,
                &format!(
                    "left out to fit {NARROW_WIDTH} characters: {} (the wide layout has them)",
                    left_out.join(", ")
                ),
                width,
                2,
            );
        }
        // Rows measured against the same bound of their own share one line.
        let mut own_bounds: Vec<(&BoundReport, Vec<&str>)> = Vec::new();
        for p in &self.policies {
            let Some(own) = &p.own_bound else { continue };
            let same = |b: &&BoundReport| {
                (b.successes, b.fluid, b.allowance) == (own.successes, own.fluid, own.allowance)
            };
            match own_bounds.iter_mut().find(|(b, _)| same(b)) {
                Some((_, names)) => names.push(&p.policy),
                None => own_bounds.push((own, vec![&p.policy])),
            }
        }
        for (own, names) in &own_bounds {
            let whose = if names.len() == 1 { "its" } else { "their" };
            wrap_into(
                &mut out,
                &format!(
                    "{}: measured against {whose} own callers' bound, {:.1}/s {}",
                    names.join(", "),
                    own.goodput,
                    unbroken(&format!(
                        "({:.0} successes: {:.0} fluid + {:.0} allowance)",
                        own.successes, own.fluid, own.allowance
                    ))
                ),
                width,
                2,
            );
        }
        for p in &self.policies {
            let note = |out: &mut String, text: String| {
                wrap_into(out, &format!("{}: {text}", p.policy), width, 2);
            };
            if let Some(classes) = &p.classes {
                let each: Vec<String> = classes
                    .iter()
                    .map(|c| {
                        unbroken(&format!(
                            "{} {} of {} ({} rejected)",
                            c.priority,
                            c.served.map_or_else(dash, percent),
                            c.offered,
                            c.rejected
                        ))
                    })
                    .collect();
                note(&mut out, format!("served {}", each.join(", ")));
            }
            if let Some(r) = &p.latency_reference {
                note(
                    &mut out,
                    format!(
                        "p50 {} ms against {} ms in the healthy reference span: ×{}",
                        p.latency_ms.map_or_else(dash, |l| format!("{:.0}", l.p50)),
                        r.p50_ms.map_or_else(dash, |x| format!("{x:.0}")),
                        r.p50_ratio.map_or_else(dash, |x| format!("{x:.2}"))
                    ),
                );
            }
            if let Some(r) = &p.retry {
                let attempts: Vec<String> = r.attempts.iter().map(u64::to_string).collect();
                note(
                    &mut out,
                    format!(
                        "retries {}, {}, {}, {}, {}, {}; {}, {}",
                        unbroken(&format!("{} sent", r.sent)),
                        unbroken(&format!("{} over budget", r.budget_exhausted)),
                        unbroken(&format!("{} past deadline", r.deadline)),
                        unbroken(&format!("{} rejected", r.rejected)),
                        unbroken(&format!("{} exhausted", r.exhausted)),
                        unbroken(&format!("{} not retryable", r.not_retryable)),
                        unbroken(&format!("requests by attempts [{}]", attempts.join(", "))),
                        unbroken(&format!("at most {}", r.most_attempts))
                    ),
                );
                if let Some(h) = &r.hedges {
                    note(
                        &mut out,
                        format!(
                            "hedges {}, {}, {}; not sent: {}, {}, {}, {}, {}; weighed in order {}",
                            unbroken(&format!("{} sent", h.sent)),
                            unbroken(&format!("{} won", h.won)),
                            unbroken(&format!("{} lost", h.lost)),
                            unbroken(&format!("{} congested", h.congested)),
                            unbroken(&format!("{} over budget", h.budget_exhausted)),
                            unbroken(&format!("{} without a free slot", h.refused)),
                            unbroken(&format!("{} past deadline", h.deadline)),
                            unbroken(&format!("{} out of attempts", h.exhausted)),
                            h.in_order,
                        ),
                    );
                }
                note(
                    &mut out,
                    format!(
                        "{} attempts a request; answered in p50 / p99 / p99.9 {} ms",
                        r.attempts_per_request
                            .map_or_else(dash, |a| format!("{a:.3}")),
                        p.latency_ms.map_or_else(dash, |l| format!(
                            "{:.0} / {:.0} / {:.0}",
                            l.p50, l.p99, l.p999
                        )),
                    ),
                );
            }
        }
        out
    }
}

/// The most characters a line of a [`Layout::Narrow`] table takes.
pub const NARROW_WIDTH: usize = 100;

/// Which columns a scenario's table shows ([`ScenarioReport::table_in`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Layout {
    /// At most [`NARROW_WIDTH`] characters a line, for a terminal: the
    /// columns the docs discuss — goodput per second, its share of the
    /// bound, the healthy endpoint's share served, the caller's workers
    /// held by requests to the dependency (mean), attempts sent per
    /// request offered, attempts timed out, p99 latency, time to recover
    /// and breaker openings. Should numbers be too wide for the line, the
    /// last of these make room, and a line under the table names them.
    Narrow,
    /// Every column; lines as long as they need.
    Wide,
}

/// Between two columns: two spaces, so that headers of two words
/// (`sent per` over `request`) do not read on into the next.
const GAP: &str = "  ";

/// One column of a scenario's table.
struct Column {
    /// The header, in words, on two lines.
    head: [&'static str; 2],
    /// Whether [`Layout::Narrow`] shows it.
    narrow: bool,
    /// A row's cell.
    cell: fn(&PolicyReport) -> String,
}

/// Every column, in order (docs/comparison.md explains each).
const COLUMNS: [Column; 21] = [
    Column {
        head: ["goodput", "per s"],
        narrow: true,
        cell: |p| format!("{:.1}", p.goodput),
    },
    Column {
        head: ["of the", "bound"],
        narrow: true,
        cell: |p| p.goodput_vs_bound.map_or_else(dash, |r| format!("{r:.2}")),
    },
    Column {
        head: ["healthy", "served"],
        narrow: true,
        cell: |p| p.healthy.served.map_or_else(dash, percent),
    },
    Column {
        head: ["workers", "held"],
        narrow: true,
        cell: |p| format!("{:.1}", p.in_flight_mean),
    },
    Column {
        head: ["most", "held"],
        narrow: false,
        cell: |p| p.in_flight_max.to_string(),
    },
    Column {
        head: ["pool", "mean"],
        narrow: false,
        cell: |p| format!("{:.1}", p.pool_mean),
    },
    Column {
        head: ["pool", "peak"],
        narrow: false,
        cell: |p| p.pool_peak.to_string(),
    },
    Column {
        head: ["no", "worker"],
        narrow: false,
        cell: |p| p.pool_full.to_string(),
    },
    Column {
        head: ["sent per", "request"],
        narrow: true,
        cell: |p| p.amplification.map_or_else(dash, |a| format!("{a:.2}")),
    },
    Column {
        head: ["attempts", "sent"],
        narrow: false,
        cell: |p| p.sent.to_string(),
    },
    Column {
        head: ["timed", "out"],
        narrow: true,
        cell: |p| p.timeouts.to_string(),
    },
    Column {
        head: ["", "rejected"],
        narrow: false,
        cell: |p| p.rejected.to_string(),
    },
    Column {
        head: ["", "failed"],
        narrow: false,
        cell: |p| p.failed.to_string(),
    },
    Column {
        head: ["", "probes"],
        narrow: false,
        cell: |p| p.probes.to_string(),
    },
    Column {
        head: ["p50", "ms"],
        narrow: false,
        cell: |p| p.latency_ms.map_or_else(dash, |l| format!("{:.0}", l.p50)),
    },
    Column {
        head: ["p99", "ms"],
        narrow: true,
        cell: |p| p.latency_ms.map_or_else(dash, |l| format!("{:.0}", l.p99)),
    },
    Column {
        head: ["", "recovery"],
        narrow: true,
        cell: |p| match p.recovery {
            Recovery::NoFault => dash(),
            Recovery::Never => "never".to_string(),
            Recovery::After(s) => format!("{s:.0}s"),
        },
    },
    Column {
        head: ["open", "seconds"],
        narrow: false,
        cell: |p| format!("{:.0}", p.open_seconds),
    },
    Column {
        head: ["", "opens"],
        narrow: true,
        cell: |p| p.opens.to_string(),
    },
    Column {
        head: ["", "closes"],
        narrow: false,
        cell: |p| p.closes.to_string(),
    },
    Column {
        head: ["dead", "lettered"],
        narrow: false,
        cell: |p| p.dead_lettered.to_string(),
    },
];

/// The cell of a figure that is not there.
fn dash() -> String {
    "-".to_string()
}

/// A share as a percentage.
fn percent(share: f64) -> String {
    format!("{:.1}%", share * 100.0)
}

/// Marks the spaces of `text` as ones [`wrap_into`] breaks a line at only
/// if the whole does not fit on one.
fn unbroken(text: &str) -> String {
    text.replace(' ', "\u{a0}")
}

/// Appends `text` to `out` broken at spaces into lines of at most `width`
/// characters, the lines after the first indented by `indent` spaces.
/// A number stays with the word after it (`800 ms`), and an
/// [`unbroken`] phrase stays whole, unless longer than a line; a word
/// longer than a line is cut.
fn wrap_into(out: &mut String, text: &str, width: usize, indent: usize) {
    let indent = indent.min(width / 2);
    let mut pieces: Vec<String> = Vec::new();
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let word = word.replace('\u{a0}', " ");
        match pieces.last_mut() {
            Some(last) if last.ends_with(|c: char| c.is_ascii_digit()) => {
                last.push(' ');
                last.push_str(&word);
            }
            _ => pieces.push(word),
        }
    }
    let pieces = pieces.iter().flat_map(|p| {
        let whole = p.chars().count() <= width - indent;
        let words: Vec<&str> = if whole {
            vec![p.as_str()]
        } else {
            p.split(' ').filter(|w| !w.is_empty()).collect()
        };
        words
    });
    let mut line = String::new();
    let mut len = 0;
    let mut empty = true;
    for piece in pieces {
        let mut rest = piece;
        while !rest.is_empty() {
            let n = rest.chars().count();
            if !empty && len + 1 + n <= width {
                line.push(' ');
                line.push_str(rest);
                len += 1 + n;
                break;
            }
            if !empty {
                out.push_str(&line);
                out.push('\n');
                line = " ".repeat(indent);
                len = indent;
            }
            let take = n.min((width - len).max(1));
            let cut = rest.char_indices().nth(take).map_or(rest.len(), |(i, _)| i);
            line.push_str(&rest[..cut]);
            len += take;
            empty = false;
            rest = &rest[cut..];
        }
    }
    if !empty {
        out.push_str(&line);
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    #![allow(
        clippy::unwrap_used,
        reason = "a test fails loudly on the first surprise"
    )]

    use super::*;
    use crate::compare;

    /// Every word a column header may use.
    const HEADER_WORDS: [&str; 35] = [
        "policy", "goodput", "per", "s", "of", "the", "bound", "healthy", "served", "workers",
        "held", "most", "pool", "mean", "peak", "no", "worker", "sent", "request", "attempts",
        "timed", "out", "rejected", "failed", "probes", "p50", "p99", "ms", "recovery", "open",
        "seconds", "opens", "closes", "dead", "lettered",
    ];

    /// A short run with every kind of line a table has: a pool, a fault
    /// to recover from, classes, a latency reference span, and the row
    /// that retries through its limiter.
    fn report() -> ScenarioReport {
        let scenario = Scenario::from_toml(
            "test",
            r#"
            name = "every-line"
            about = "A dependency that loses half its workers for a minute, under callers of two classes that retry once; its healthy first half-minute is the latency reference. Long enough to wrap."
            duration = "3m"
            recovers_at = "90s"
            measure = { from = "30s", to = "3m" }
            latency_reference = { from = "0s", to = "30s" }
            [dependency]
            workers = 10
            service = { median = "50ms", p99 = "200ms" }
            queue = 50
            [[dependency.phase]]
            at = "30s"
            workers = 5
            [[dependency.phase]]
            at = "90s"
            workers = 10
            [traffic]
            rate = 150
            timeout = "500ms"
            deadline = "1s"
            attempts = 2
            classes = [
                { priority = "critical", share = 0.3 },
                { priority = "sheddable", share = 0.7 },
            ]
            "#,
        )
        .unwrap();
        let (mut report, _) = compare(&[scenario], &crate::rows::all(), 1, |_| {}).unwrap();
        report.scenarios.remove(0)
    }

    /// The two header lines and the rows of `table`, checked: headers in
    /// words of [`HEADER_WORDS`], every row as long as the header (no name
    /// or cell overflows its column, none pushes the others right).
    fn header_and_rows<'a>(table: &'a str, report: &ScenarioReport) -> Vec<&'a str> {
        let lines: Vec<&str> = table.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.starts_with("policy"))
            .unwrap_or_else(|| panic!("no header line starting `policy` in\n{table}"));
        assert!(at >= 1, "{table}");
        for word in lines[at]
            .split_whitespace()
            .chain(lines[at - 1].split_whitespace())
        {
            assert!(
                HEADER_WORDS.contains(&word),
                "header `{word}` is not a word of the list:\n{table}"
            );
        }
        let rows = &lines[at + 1..at + 1 + report.policies.len()];
        let width = lines[at].chars().count();
        for (row, p) in rows.iter().zip(&report.policies) {
            assert!(
                row.starts_with(&format!("{}{GAP}", p.policy)),
                "`{}` runs into its next column:\n{table}",
                p.policy
            );
            assert_eq!(
                row.chars().count(),
                width,
                "`{row}` is out of line:\n{table}"
            );
        }
        lines[at - 1..at + 1 + report.policies.len()].to_vec()
    }

    fn assert_fits(table: &str) {
        for line in table.lines() {
            assert!(
                line.chars().count() <= NARROW_WIDTH,
                "{} characters: `{line}`\n{table}",
                line.chars().count()
            );
        }
    }

    #[test]
    fn a_scenario_table_fits_100_columns_with_its_columns_named_in_words() {
        let report = report();
        let table = report.table();
        assert_fits(&table);
        let head = header_and_rows(&table, &report);
        for word in [
            "goodput", "bound", "healthy", "workers", "timed", "recovery", "opens",
        ] {
            assert!(
                head[1].contains(word) || head[0].contains(word),
                "no `{word}`:\n{table}"
            );
        }
        assert!(table.contains("served critical"), "{table}");
        assert!(table.contains("healthy reference span"), "{table}");
        assert!(table.contains("breaker+gradient+retry: retries"), "{table}");
    }

    #[test]
    fn the_wide_table_has_every_column_named_in_words() {
        let report = report();
        let table = report.table_in(Layout::Wide);
        let head = header_and_rows(&table, &report);
        for column in &COLUMNS {
            let [top, bottom] = column.head;
            assert!(
                head[0].contains(top) && head[1].contains(bottom),
                "no `{top} {bottom}` column:\n{table}"
            );
        }
        // Its prose wraps at the table's width.
        let width = head[1].chars().count();
        assert!(width > NARROW_WIDTH, "{table}");
        assert!(table.lines().all(|l| l.chars().count() <= width), "{table}");
    }

    #[test]
    fn numbers_too_wide_for_100_columns_push_out_the_last_columns_and_say_so() {
        let mut report = report();
        for p in &mut report.policies {
            p.goodput = 1e12;
            p.in_flight_mean = 1e9;
            p.timeouts = u64::MAX;
        }
        let table = report.table();
        assert_fits(&table);
        let head = header_and_rows(&table, &report);
        assert!(
            head[1].contains("goodput") || head[0].contains("goodput"),
            "{table}"
        );
        assert!(!head[1].contains("recovery"), "{table}");
        assert!(
            table.contains("left out to fit 100 characters: timed out, p99 ms, recovery, opens"),
            "{table}"
        );
    }

    #[test]
    fn prose_wraps_at_spaces_keeping_a_number_with_its_unit() {
        let mut out = String::new();
        wrap_into(&mut out, "callers time out at 800 ms and retry", 23, 2);
        assert_eq!(out, "callers time out at\n  800 ms and retry\n");
        let mut out = String::new();
        wrap_into(&mut out, &format!("xyz {}", unbroken("a b c d")), 10, 2);
        assert_eq!(out, "xyz\n  a b c d\n", "a phrase stays whole");
        let mut out = String::new();
        wrap_into(&mut out, &format!("x: {}", unbroken("a b c d e f")), 8, 2);
        assert_eq!(
            out, "x: a b c\n  d e f\n",
            "a phrase longer than a line breaks"
        );
        let mut out = String::new();
        wrap_into(&mut out, "abcdefghij", 4, 0);
        assert_eq!(out, "abcd\nefgh\nij\n");
    }
}
