//! Pictures. One SVG per scenario, over time, one line per policy: goodput
//! against the bound (with each breaker transition marked), the admitted
//! fraction, the caller's requests in flight to the dependency, the
//! caller's busy workers, and the share of the healthy endpoint served.
//! And one SVG per kind of a sweep: severity across, goodput against the
//! bound and the share of attempts sent up.
//!
//! Every line is drawn on its own time step (the bound's series and each
//! policy's are sampled apart), and the legend sits beside the panels, not
//! on the data.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::report::{PolicyReport, ScenarioReport};
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
