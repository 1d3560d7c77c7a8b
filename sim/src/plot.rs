//! One SVG per scenario, over time, one line per policy: goodput against
//! the bound (with each breaker transition marked), the admitted fraction,
//! the caller's requests in flight to the dependency, the caller's busy
//! workers, and the share of the healthy endpoint served.

use plotters::prelude::*;

use super::report::{PolicyReport, ScenarioReport};

type Pick = fn(&PolicyReport) -> &Vec<f64>;

/// Render `report` as an SVG document.
///
/// # Errors
///
/// A description of what plotters could not draw.
pub fn svg(report: &ScenarioReport) -> Result<String, String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (1100, 1400)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let root = root
            .titled(&report.name, ("sans-serif", 22))
            .map_err(|e| e.to_string())?;
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
        let areas = root.split_evenly((5, 1));
        let step = report
            .policies
            .first()
            .map_or(1, |p| p.series.step_seconds.max(1)) as f64;
        for (n, ((label, pick), area)) in panels.iter().zip(areas.iter()).enumerate() {
            let goodput = n == 0;
            let points = report
                .policies
                .iter()
                .map(|p| pick(p).len())
                .max()
                .unwrap_or(0);
            let x_max = (points as f64 * step / 60.0).max(1.0 / 60.0);
            let bound_max = if goodput {
                report.bound.series.iter().copied().fold(0.0f64, f64::max)
            } else {
                0.0
            };
            let y_max = report
                .policies
                .iter()
                .flat_map(|p| pick(p).iter().copied())
                .fold(bound_max, f64::max)
                .max(1e-9)
                * 1.08;
            let mut chart = ChartBuilder::on(area)
                .margin(8)
                .x_label_area_size(28)
                .y_label_area_size(56)
                .caption(*label, ("sans-serif", 15))
                .build_cartesian_2d(0f64..x_max, 0f64..y_max)
                .map_err(|e| e.to_string())?;
            chart
                .configure_mesh()
                .x_desc("minutes")
                .light_line_style(WHITE)
                .draw()
                .map_err(|e| e.to_string())?;
            if goodput {
                let line = report
                    .bound
                    .series
                    .iter()
                    .enumerate()
                    .map(|(k, &y)| (k as f64 * step / 60.0, y));
                chart
                    .draw_series(LineSeries::new(line, BLACK.stroke_width(2)))
                    .map_err(|e| e.to_string())?
                    .label("bound")
                    .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLACK));
            }
            for (i, policy) in report.policies.iter().enumerate() {
                let style = Palette99::pick(i).to_rgba().stroke_width(1);
                let line = pick(policy)
                    .iter()
                    .enumerate()
                    .map(|(k, &y)| (k as f64 * step / 60.0, y));
                chart
                    .draw_series(LineSeries::new(line, style))
                    .map_err(|e| e.to_string())?
                    .label(policy.policy.clone())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], style));
                if goodput {
                    // Transitions, staggered by policy so rows stay apart.
                    let y = y_max * (0.98 - 0.035 * (i % 12) as f64);
                    let color = Palette99::pick(i).to_rgba();
                    for t in &policy.transitions {
                        let x = t.at_seconds / 60.0;
                        let mark: DynElement<'_, _, _> = match t.to {
                            "open" | "forced_open" => {
                                TriangleMarker::new((x, y), 4, color.filled()).into_dyn()
                            }
                            "half_open" => Circle::new((x, y), 2, color.filled()).into_dyn(),
                            _ => Cross::new((x, y), 3, color).into_dyn(),
                        };
                        chart
                            .plotting_area()
                            .draw(&mark)
                            .map_err(|e| e.to_string())?;
                    }
                }
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK.mix(0.3))
                .label_font(("sans-serif", 11))
                .draw()
                .map_err(|e| e.to_string())?;
        }
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(out)
}
