//! One SVG per scenario: admitted fraction, caller in-flight and goodput
//! over time, one line per policy.

use plotters::prelude::*;

use super::report::{ScenarioReport, SeriesReport};

/// Render `report` as an SVG document.
///
/// # Errors
///
/// A description of what plotters could not draw.
pub fn svg(report: &ScenarioReport) -> Result<String, String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (1100, 900)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let root = root
            .titled(&report.name, ("sans-serif", 22))
            .map_err(|e| e.to_string())?;
        type Pick = fn(&SeriesReport) -> &Vec<f64>;
        let panels: [(&str, Pick); 3] = [
            ("admitted fraction", |s| &s.admitted_fraction),
            ("caller in-flight", |s| &s.in_flight),
            ("goodput (successes/s)", |s| &s.goodput),
        ];
        let areas = root.split_evenly((3, 1));
        for ((label, pick), area) in panels.iter().zip(areas.iter()) {
            let step = report
                .policies
                .first()
                .map_or(1, |p| p.series.step_seconds.max(1));
            let points = report
                .policies
                .iter()
                .map(|p| pick(&p.series).len())
                .max()
                .unwrap_or(0);
            let x_max = (points as f64 * step as f64 / 60.0).max(1.0 / 60.0);
            let y_max = report
                .policies
                .iter()
                .flat_map(|p| pick(&p.series).iter().copied())
                .fold(0.0f64, f64::max)
                .max(1e-9)
                * 1.05;
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
            for (i, policy) in report.policies.iter().enumerate() {
                let color = Palette99::pick(i).to_rgba();
                let style = if policy.policy == "oracle" {
                    BLACK.stroke_width(2)
                } else {
                    color.stroke_width(1)
                };
                let line = pick(&policy.series)
                    .iter()
                    .enumerate()
                    .map(|(k, &y)| (k as f64 * step as f64 / 60.0, y));
                chart
                    .draw_series(LineSeries::new(line, style))
                    .map_err(|e| e.to_string())?
                    .label(policy.policy.clone())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], style));
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
