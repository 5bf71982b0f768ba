//! `goals.svg`, after Rinnegan Fig. 5: for scenarios whose apps set
//! throughput goals, one panel per policy with each goal app's tasks per
//! second over time (one point per optimizer period) and its goal as a
//! dashed line of the same colour.

use crate::report::{PolicyResult, ScenarioReport};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::error::Error;
use std::io;

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

const WIDTH: u32 = 1000;
const PANEL_HEIGHT: u32 = 260;
const FONT: &str = "sans-serif";

/// The plot, or `None` when no app of the report has a throughput goal.
pub fn render_goals_svg(report: &ScenarioReport) -> io::Result<Option<String>> {
    let apps = goal_apps(report);
    if apps.is_empty() {
        return Ok(None);
    }
    let panels = report.results.len().max(1) as u32;
    let mut svg = String::new();
    {
        let root =
            SVGBackend::with_string(&mut svg, (WIDTH, PANEL_HEIGHT * panels)).into_drawing_area();
        root.fill(&WHITE)
            .map_err(|e| io::Error::other(e.to_string()))?;
        let x_end = x_end(report);
        for (area, result) in root
            .split_evenly((report.results.len(), 1))
            .iter()
            .zip(&report.results)
        {
            draw_panel(area, result, &apps, x_end).map_err(to_io_error)?;
        }
        root.present()
            .map_err(|e| io::Error::other(e.to_string()))?;
    }
    Ok(Some(svg))
}

fn to_io_error(e: Box<dyn Error>) -> io::Error {
    io::Error::other(e.to_string())
}

/// Apps with a goal under any policy, in scenario order.
fn goal_apps(report: &ScenarioReport) -> Vec<&str> {
    report
        .apps
        .iter()
        .map(String::as_str)
        .filter(|app| {
            report
                .results
                .iter()
                .any(|r| r.apps.get(*app).is_some_and(|a| a.goal.is_some()))
        })
        .collect()
}

/// The last period's end over every policy and app (the x axis' end).
fn x_end(report: &ScenarioReport) -> f64 {
    report
        .results
        .iter()
        .flat_map(|r| r.apps.values())
        .filter_map(|a| a.goal.as_ref())
        .flat_map(|g| g.achieved.iter().map(|p| p.0))
        .fold(1.0, f64::max)
}

fn draw_panel(
    area: &Area,
    result: &PolicyResult,
    apps: &[&str],
    x_end: f64,
) -> Result<(), Box<dyn Error>> {
    let goals: Vec<_> = apps
        .iter()
        .filter_map(|app| result.apps.get(*app)?.goal.as_ref().map(|g| (*app, g)))
        .collect();
    let y_top = goals
        .iter()
        .flat_map(|(_, g)| g.achieved.iter().map(|p| p.1).chain([g.target_tasks_per_s]))
        .filter(|v| v.is_finite())
        .fold(1.0, f64::max)
        * 1.15;
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!("{}: tasks/s per 0.5 s period (dashed: goal)", result.policy),
            (FONT, 15),
        )
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(50)
        .build_cartesian_2d(0.0..x_end, 0.0..y_top)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .label_style((FONT, 12))
        .x_desc("simulated s")
        .y_desc("tasks/s")
        .axis_desc_style((FONT, 12))
        .draw()?;
    for (i, (app, goal)) in goals.iter().enumerate() {
        let colour = super::svg::palette(i);
        chart
            .draw_series(LineSeries::new(
                goal.achieved.iter().copied().filter(|p| p.1.is_finite()),
                colour.stroke_width(2),
            ))?
            .label(app.to_string())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], colour.stroke_width(2)));
        let (from, to) = goal
            .achieved
            .first()
            .zip(goal.achieved.last())
            .map_or((0.0, x_end), |(a, b)| (a.0, b.0));
        chart.draw_series(DashedLineSeries::new(
            [
                (from, goal.target_tasks_per_s),
                (to, goal.target_tasks_per_s),
            ],
            6,
            4,
            colour.stroke_width(1),
        ))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .label_font((FONT, 12))
        .draw()?;
    Ok(())
}
