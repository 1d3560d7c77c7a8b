//! Pictures. One SVG per scenario, over time, one line per policy: goodput
//! against the bound (with each breaker transition marked), the admitted
//! fraction, the caller's requests in flight to the dependency, the
//! caller's busy workers, and the share of the healthy endpoint served.
//! One per scenario of its latency percentiles, a line per row, to set a
//! row that hedges beside its twin that does not. And one SVG per kind of
//! a sweep: severity across, goodput against the bound and the share of
//! attempts sent up.
//!
//! Every line is drawn on its own time step (the bound's series and each
//! policy's are sampled apart), and the legend sits beside the panels, not
//! on the data.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::report::{Latency, PolicyReport, ScenarioReport};
use super::sweep::{Kind, SweepReport};

type Pick = fn(&PolicyReport) -> &Vec<f64>;

/// One line of a picture: its label and its points.
pub type Line = (String, Vec<(f64, f64)>);

/// `values`, one per `step_seconds`, as points in minutes, in a run of
/// `end` minutes: each point at the start of the span it stands for, none
/// for a span past the end, and the last repeated at its span's end (the
/// run's end, for a last span the run cut short).
fn over_time(values: &[f64], step_seconds: u64, end: f64) -> Vec<(f64, f64)> {
    let step = step_seconds.max(1) as f64 / 60.0;
    let mut points: Vec<(f64, f64)> = values
        .iter()
        .enumerate()
        .map(|(k, &y)| (k as f64 * step, y))
        .take_while(|&(x, _)| x < end)
        .collect();
    if let Some(&(_, last)) = points.last() {
        points.push(((points.len() as f64 * step).min(end), last));
    }
    points
}

/// The goodput panel's lines of `report`: the bound first, then each
/// policy in `rows` (every policy if empty), each on its own time step.
pub fn goodput_lines(report: &ScenarioReport, rows: &[&str]) -> Vec<Line> {
    let end = report.duration_seconds / 60.0;
    let mut lines = vec![(
        "bound".to_string(),
        over_time(&report.bound.series, report.bound.step_seconds, end),
    )];
    lines.extend(picked(report, rows).map(|p| {
        (
            p.policy.clone(),
            over_time(&p.series.goodput, p.series.step_seconds, end),
        )
    }));
    lines
}

fn picked<'a>(
    report: &'a ScenarioReport,
    rows: &'a [&str],
) -> impl Iterator<Item = &'a PolicyReport> + 'a {
    report
        .policies
        .iter()
        .filter(move |p| rows.is_empty() || rows.contains(&p.policy.as_str()))
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// A legend in its own column: a swatch and a name per line.
fn legend(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    names: &[(String, RGBAColor)],
) -> Result<(), String> {
    for (i, (name, color)) in names.iter().enumerate() {
        let y = 40 + 18 * i as i32;
        area.draw(&PathElement::new(
            vec![(8, y), (30, y)],
            color.stroke_width(3),
        ))
        .map_err(err)?;
        area.draw(&Text::new(name.clone(), (36, y - 6), ("sans-serif", 12)))
            .map_err(err)?;
    }
    Ok(())
}

fn color(i: usize) -> RGBAColor {
    Palette99::pick(i).to_rgba()
}

/// Render `report` as an SVG document, with the rows named in `rows` (every
/// row if empty).
///
/// # Errors
///
/// A description of what plotters could not draw.
pub fn svg(report: &ScenarioReport, rows: &[&str]) -> Result<String, String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (1250, 1400)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let root = root.titled(&report.name, ("sans-serif", 22)).map_err(err)?;
        let (charts, side) = root.split_horizontally(1060);
        let policies: Vec<&PolicyReport> = picked(report, rows).collect();
        let mut names = vec![("bound".to_string(), BLACK.to_rgba())];
        names.extend(
            policies
                .iter()
                .enumerate()
                .map(|(i, p)| (p.policy.clone(), color(i))),
        );
        legend(&side, &names)?;
        let panels: [(&str, Pick); 5] = [
            (
                "goodput (successes/s); black: the bound; marks: ▲ open, ● half-open, × closed",
                |p| &p.series.goodput,
            ),
            ("admitted fraction", |p| &p.series.admitted_fraction),
            ("caller in-flight to the dependency", |p| {
                &p.series.in_flight
            }),
            ("caller's busy workers (per instance)", |p| &p.series.pool),
            ("healthy endpoint: share served", |p| {
                &p.series.healthy_served
            }),
        ];
        let x_max = (report.duration_seconds / 60.0).max(1.0 / 60.0);
        let goodput = goodput_lines(report, rows);
        for (n, ((label, pick), area)) in panels
            .iter()
            .zip(charts.split_evenly((5, 1)).iter())
            .enumerate()
        {
            let lines: Vec<Line> = if n == 0 {
                goodput.clone()
            } else {
                policies
                    .iter()
                    .map(|p| {
                        (
                            p.policy.clone(),
                            over_time(pick(p), p.series.step_seconds, x_max),
                        )
                    })
                    .collect()
            };
            let y_max = lines
                .iter()
                .flat_map(|(_, pts)| pts.iter().map(|&(_, y)| y))
                .fold(0.0f64, f64::max)
                .max(1e-9)
                * 1.08;
            let mut chart = ChartBuilder::on(area)
                .margin(8)
                .x_label_area_size(28)
                .y_label_area_size(56)
                .caption(*label, ("sans-serif", 15))
                .build_cartesian_2d(0f64..x_max, 0f64..y_max)
                .map_err(err)?;
            chart
                .configure_mesh()
                .x_desc("minutes")
                .light_line_style(WHITE)
                .draw()
                .map_err(err)?;
            // The bound, if drawn, comes first and in black.
            let offset = usize::from(n == 0);
            for (i, (_, pts)) in lines.iter().enumerate() {
                let style = if n == 0 && i == 0 {
                    BLACK.stroke_width(2)
                } else {
                    color(i - offset).stroke_width(1)
                };
                chart
                    .draw_series(LineSeries::new(pts.iter().copied(), style))
                    .map_err(err)?;
            }
            if n == 0 {
                for (i, policy) in policies.iter().enumerate() {
                    // Transitions, staggered by policy so rows stay apart.
                    let y = y_max * (0.98 - 0.035 * (i % 12) as f64);
                    for t in &policy.transitions {
                        let x = t.at_seconds / 60.0;
                        let mark: DynElement<'_, _, _> = match t.to {
                            "open" | "forced_open" => {
                                TriangleMarker::new((x, y), 4, color(i).filled()).into_dyn()
                            }
                            "half_open" => Circle::new((x, y), 2, color(i).filled()).into_dyn(),
                            _ => Cross::new((x, y), 3, color(i)).into_dyn(),
                        };
                        chart.plotting_area().draw(&mark).map_err(err)?;
                    }
                }
            }
        }
        root.present().map_err(err)?;
    }
    Ok(out)
}

/// The rows a scenario's latency picture shows by default: the
/// recommended configuration with rheostat's retry, without hedges and
/// with them.
pub const LATENCY_ROWS: [&str; 2] = ["rec.+retry", "rec.+hedge"];

/// The latency picture's colours, dark enough for the labels drawn in
/// them; past these, the palette the other pictures use.
const LATENCY_COLORS: [RGBColor; 4] = [
    RGBColor(31, 90, 180),
    RGBColor(200, 40, 30),
    RGBColor(30, 130, 40),
    RGBColor(120, 70, 170),
];

fn latency_color(i: usize) -> RGBAColor {
    LATENCY_COLORS
        .get(i)
        .map_or_else(|| color(i), |c| c.to_rgba())
}

/// A percentile of a row's latency.
type Percentile = fn(&Latency) -> f64;

/// The percentiles a latency picture shows, with their labels.
const PERCENTILES: [(&str, Percentile); 4] = [
    ("p50", |l| l.p50),
    ("p90", |l| l.p90),
    ("p99", |l| l.p99),
    ("p99.9", |l| l.p999),
];

/// The lines of `report`'s latency picture: for each row in `rows` (every
/// row if empty) that answered any request, its p50, p90, p99 and p99.9
/// in milliseconds, across at 0 to 3.
pub fn latency_lines(report: &ScenarioReport, rows: &[&str]) -> Vec<Line> {
    picked(report, rows)
        .filter_map(|p| {
            let latency = p.latency_ms?;
            let points = (0..)
                .zip(PERCENTILES)
                .map(|(x, (_, at))| (f64::from(x), at(&latency)))
                .collect();
            Some((p.policy.clone(), points))
        })
        .collect()
}

/// Render `report`'s latency percentiles as an SVG document: the p50, p90,
/// p99 and p99.9 of the requests answered (from arrival, what the caller
/// sees) on a logarithmic scale, a line per row in `rows` (every row if
/// empty), each point labelled in milliseconds.
///
/// # Errors
///
/// A description of what plotters could not draw.
pub fn latency_svg(report: &ScenarioReport, rows: &[&str]) -> Result<String, String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (1000, 620)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let root = root
            .titled(
                &format!("{}: latency of the requests answered", report.name),
                ("sans-serif", 22),
            )
            .map_err(err)?;
        let (chart_area, side) = root.split_horizontally(700);
        let lines = latency_lines(report, rows);
        // Each row named with the attempts it made a request, where known.
        let names: Vec<(String, RGBAColor)> = lines
            .iter()
            .enumerate()
            .map(|(i, (name, _))| {
                let attempts = report
                    .policy(name)
                    .and_then(|p| p.retry.as_ref())
                    .and_then(|r| r.attempts_per_request);
                let name = match attempts {
                    Some(a) => format!("{name}: {a:.3} attempts a request"),
                    None => name.clone(),
                };
                (name, latency_color(i))
            })
            .collect();
        legend(&side, &names)?;
        let ys = || {
            lines
                .iter()
                .flat_map(|(_, pts)| pts.iter().map(|&(_, y)| y))
        };
        let y_max = ys().fold(1.0f64, f64::max) * 1.6;
        let y_min = ys().fold(f64::INFINITY, f64::min).clamp(0.1, y_max) / 1.6;
        let mut chart = ChartBuilder::on(&chart_area)
            .margin(14)
            .x_label_area_size(36)
            .y_label_area_size(64)
            .caption(
                "milliseconds, from a request's arrival to its answer (logarithmic)",
                ("sans-serif", 15),
            )
            .build_cartesian_2d(-0.3f64..3.3f64, (y_min..y_max).log_scale())
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_labels(PERCENTILES.len())
            .x_label_formatter(&|x| {
                let i = x.round();
                PERCENTILES
                    .iter()
                    .zip(0..)
                    .find(|&(_, k)| (f64::from(k) - i).abs() < 1e-9 && (x - i).abs() < 1e-6)
                    .map_or_else(String::new, |((label, _), _)| (*label).to_string())
            })
            .y_desc("ms")
            .y_label_formatter(&|y| format!("{y:.0}"))
            .light_line_style(WHITE)
            .draw()
            .map_err(err)?;
        for (i, (_, pts)) in lines.iter().enumerate() {
            let c = latency_color(i);
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))
                .map_err(err)?;
            for &(x, y) in pts {
                chart
                    .plotting_area()
                    .draw(&Circle::new((x, y), 4, c.filled()))
                    .map_err(err)?;
                // The value beside its point: the first row's above the
                // line, the others' below it, a line apart.
                let label = format!("{y:.0} ms");
                let dy = if i == 0 { -20 } else { 6 + 14 * (i as i32 - 1) };
                let dx = 8;
                chart
                    .plotting_area()
                    .draw(
                        &(EmptyElement::at((x, y))
                            + Text::new(label, (dx, dy), ("sans-serif", 12).into_font().color(&c))),
                    )
                    .map_err(err)?;
            }
        }
        root.present().map_err(err)?;
    }
    Ok(out)
}

/// The rows a sweep's pictures show by default: no limiter, the binary
/// breaker beside the throttle, each adaptive limit, and the recommended
/// configuration, with its timeout learned and with the callers' own.
pub const SWEEP_ROWS: [&str; 8] = [
    "none",
    "breaker",
    "throttle",
    "aimd",
    "vegas",
    "gradient",
    "recommended",
    "rec. typed",
];

/// The lines of one kind of a sweep's pictures, for each row in `rows`
/// that the sweep ran: severity across, and up either goodput against the
/// bound (`sent` false) or the share of attempts sent.
pub fn sweep_lines(report: &SweepReport, kind: Kind, rows: &[&str], sent: bool) -> Vec<Line> {
    let cells: Vec<_> = report.cells.iter().filter(|c| c.kind == kind).collect();
    rows.iter()
        .filter(|name| cells.iter().any(|c| c.row(name).is_some()))
        .map(|name| {
            let pts = cells
                .iter()
                .filter_map(|c| {
                    let r = c.row(name)?;
                    let y = if sent { r.sent? } else { r.vs_bound? };
                    Some((c.severity, y))
                })
                .collect();
            ((*name).to_string(), pts)
        })
        .collect()
}

/// Render one kind of a sweep as an SVG document: severity across; goodput
/// as a share of the bound above, the share of attempts sent below; a line
/// per row in `rows`.
///
/// # Errors
///
/// A description of what plotters could not draw.
pub fn sweep_svg(report: &SweepReport, kind: Kind, rows: &[&str]) -> Result<String, String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (1000, 760)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let root = root
            .titled(&format!("{}: {}", report.name, kind), ("sans-serif", 22))
            .map_err(err)?;
        let (charts, side) = root.split_horizontally(820);
        let goodput = sweep_lines(report, kind, rows, false);
        let names: Vec<(String, RGBAColor)> = goodput
            .iter()
            .enumerate()
            .map(|(i, (name, _))| (name.clone(), color(i)))
            .collect();
        legend(&side, &names)?;
        let x_min = goodput
            .iter()
            .flat_map(|(_, p)| p.iter().map(|&(x, _)| x))
            .fold(1.0f64, f64::min);
        let x_max = goodput
            .iter()
            .flat_map(|(_, p)| p.iter().map(|&(x, _)| x))
            .fold(0.0f64, f64::max);
        let (x_min, x_max) = if x_max > x_min {
            (x_min, x_max)
        } else {
            (0.0, 1.0)
        };
        let pad = (x_max - x_min) * 0.04;
        let panels = [
            (
                "goodput ÷ the bound (×: the caller not kept whole, its pool full or its other endpoint short)",
                goodput,
            ),
            (
                "share of attempts sent",
                sweep_lines(report, kind, rows, true),
            ),
        ];
        for ((label, lines), area) in panels.iter().zip(charts.split_evenly((2, 1)).iter()) {
            let mut chart = ChartBuilder::on(area)
                .margin(10)
                .x_label_area_size(36)
                .y_label_area_size(48)
                .caption(*label, ("sans-serif", 15))
                .build_cartesian_2d((x_min - pad)..(x_max + pad), 0f64..1.05)
                .map_err(err)?;
            chart
                .configure_mesh()
                .x_desc(kind.severity_label())
                .light_line_style(WHITE)
                .draw()
                .map_err(err)?;
            for (i, (name, pts)) in lines.iter().enumerate() {
                let c = color(i);
                chart
                    .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))
                    .map_err(err)?;
                // A dot where the row kept the caller whole, a cross where
                // it did not.
                for &p in pts {
                    let whole = report
                        .cells
                        .iter()
                        .find(|cell| cell.kind == kind && cell.severity == p.0)
                        .and_then(|cell| cell.row(name))
                        .is_some_and(|r| r.whole);
                    let mark: DynElement<'_, _, _> = if whole {
                        Circle::new(p, 3, c.filled()).into_dyn()
                    } else {
                        Cross::new(p, 5, c.stroke_width(2)).into_dyn()
                    };
                    chart.plotting_area().draw(&mark).map_err(err)?;
                }
            }
        }
        root.present().map_err(err)?;
    }
    Ok(out)
}
